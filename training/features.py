"""What the model is told about its inputs: one :class:`FeatureSpec` per feature, and the task.

This is the seam between the data side (reading a user's file, its contract, its
categories) and the model side (the built-in MLP, a user's own ``nn.Module`` built by
``model.factory``, a model trained elsewhere). Both sides speak only this:

* a feature is ``numeric`` or ``categorical``; a categorical feature lists its
  ``categories`` (as strings, in the order their codes are given);
* the model's input is always one float32 matrix, one column per feature in spec
  order: a numeric value as is, a categorical value as its code (the index into
  ``categories``), a category never seen in training as ``unseen_code``
  (``len(categories)``), and a missing value as NaN (a spec's ``missing`` says the
  training split had some: the built-in module learns them, see
  :mod:`driftgate.training.model`). Tensors cannot hold strings, so
  the string-to-code step is here, outside the module; what a code means
  (an embedding, one-hot, the unseen bucket) is inside the module, saved with its
  weights and exported with it.

:func:`encode_features` is the one place that turns a frame into that matrix, for
training, the gate, the service and the monitors alike.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Literal, get_args

import numpy as np
import pandas as pd

FeatureKind = Literal["numeric", "categorical"]
FEATURE_KINDS: tuple[str, ...] = get_args(FeatureKind)

# What the model predicts; drives the loss, the metrics, the gate checks that apply,
# the service's response and the profile of the outputs.
Task = Literal["binary", "multiclass", "regression"]
TASKS: tuple[str, ...] = get_args(Task)


@dataclass(frozen=True)
class FeatureSpec:
    """One model input: its column name, its kind and, if categorical, its categories."""

    name: str
    kind: FeatureKind = "numeric"
    categories: tuple[str, ...] = field(default=())
    # Whether the training split had missing values in this feature: the built-in model
    # then learns them (a missing indicator input, or a missing category) and the
    # service accepts a null for it without a contract.
    missing: bool = False

    def __post_init__(self) -> None:
        if self.kind not in FEATURE_KINDS:
            raise ValueError(f"feature {self.name!r}: kind must be one of {FEATURE_KINDS}")
        if self.kind == "numeric" and self.categories:
            raise ValueError(f"feature {self.name!r} is numeric but lists categories")
        if len(set(self.categories)) != len(self.categories):
            raise ValueError(f"feature {self.name!r} lists a category twice")

    @property
    def unseen_code(self) -> int:
        """The code of a category absent from ``categories`` (the module's unseen bucket)."""
        return len(self.categories)

    def to_dict(self) -> dict:
        data = {"name": self.name, "kind": self.kind, "categories": list(self.categories)}
        # Written only when true: a spec without missing values reads as before.
        return data | ({"missing": True} if self.missing else {})

    @classmethod
    def from_dict(cls, data: dict) -> FeatureSpec:
        return cls(
            name=str(data["name"]),
            kind=data.get("kind", "numeric"),
            categories=tuple(str(c) for c in data.get("categories", ())),
            missing=bool(data.get("missing", False)),
        )


def numeric_specs(names: Iterable[str]) -> list[FeatureSpec]:
    """Specs for all-numeric features (the demo's shape)."""
    return [FeatureSpec(name) for name in names]


def category_key(value: object) -> str:
    """The string a categorical value is known by: ``3``, ``3.0`` and ``"3"`` are one category.

    Integer codes and their strings must meet, because a client may send either.
    """
    if isinstance(value, bool | np.bool_):
        return "true" if value else "false"
    if isinstance(value, float | np.floating) and float(value).is_integer():
        return str(int(value))
    return str(value)


def _codes(values: pd.Series, spec: FeatureSpec) -> np.ndarray:
    lookup = {category: code for code, category in enumerate(spec.categories)}
    missing = values.isna().to_numpy()
    codes = np.array(
        [
            np.nan if gone else lookup.get(category_key(v), spec.unseen_code)
            for v, gone in zip(values.tolist(), missing, strict=True)
        ],
        dtype=np.float32,
    )
    return codes


def encode_features(frame: pd.DataFrame, specs: Sequence[FeatureSpec]) -> np.ndarray:
    """The model input for ``frame``: float32, one column per spec, in spec order.

    Numeric columns are cast (a non-numeric one is a ``ValueError`` naming it);
    categorical columns become codes as described in the module docstring. Missing
    values stay NaN: the model imputes them inside its own preprocessing.
    """
    absent = [s.name for s in specs if s.name not in frame.columns]
    if absent:
        raise KeyError(f"missing feature column(s): {', '.join(absent)}")
    matrix = np.empty((len(frame), len(specs)), dtype=np.float32)
    for index, spec in enumerate(specs):
        column = frame[spec.name]
        if spec.kind == "categorical":
            matrix[:, index] = _codes(column, spec)
            continue
        if not (pd.api.types.is_numeric_dtype(column) or pd.api.types.is_bool_dtype(column)):
            raise ValueError(f"column '{spec.name}' is not numeric (dtype {column.dtype})")
        matrix[:, index] = column.to_numpy(dtype=np.float64, na_value=np.nan)
    return matrix
