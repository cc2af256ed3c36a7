"""A frame as a model sees it: the input matrix and the target, per task (no torch here).

* :func:`model_inputs` — the float32 matrix of a frame in spec order; numeric columns
  may be missing (NaN, imputed inside the model) but never infinite, categorical ones
  become codes (:func:`driftgate.training.features.encode_features`).
* :func:`learn_classes` / :func:`encode_target` — the target as the loss and the metrics
  read it: 0/1 for binary, the index into the classes learnt from the training split for
  multiclass (ints or strings, stored with the model version), the value for regression.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from driftgate.training.data import DataError, feature_matrix
from driftgate.training.features import FeatureSpec, category_key, encode_features


def model_inputs(frame: pd.DataFrame, specs: Sequence[FeatureSpec]) -> np.ndarray:
    """The model input of ``frame``; DataError naming a missing or non-numeric column,
    or a numeric one holding an infinity. Missing values stay NaN: the model imputes
    them (learnt on the training split, see :mod:`driftgate.training.model`)."""
    if all(spec.kind == "numeric" for spec in specs):
        return feature_matrix(frame, [spec.name for spec in specs], allow_missing=True)
    numeric = [spec.name for spec in specs if spec.kind == "numeric"]
    if numeric:
        feature_matrix(frame, numeric, allow_missing=True)  # the same checks and messages
    try:
        return encode_features(frame, specs)
    except (KeyError, ValueError) as exc:
        raise DataError(str(exc).strip("'\"")) from exc


def refuse_unlearnt_missing(
    frame: pd.DataFrame, specs: Sequence[FeatureSpec], setting: str
) -> None:
    """DataError naming the first feature with missing values in the training split,
    for a module driftgate did not build: only the built-in model learns them (its own
    imputation and indicators); a user's module would be handed NaN and diverge."""
    for spec in specs:
        if not spec.missing:
            continue
        absent = frame[spec.name].isna().to_numpy()
        raise DataError(
            f"column '{spec.name}' has {int(absent.sum())} missing value(s) in the training "
            f"split (first at row {int(np.flatnonzero(absent)[0])}); the built-in model "
            f"learns missing values, {setting} does not: impute them in the data or in "
            "the module"
        )


def _class_order(key: str) -> tuple[int, float, str]:
    try:
        return (0, float(key), key)
    except ValueError:
        return (1, 0.0, key)


def learn_classes(target: pd.Series) -> tuple[str, ...]:
    """The classes of a multiclass target (numbers in numeric order, then strings)."""
    keys = {category_key(v) for v in target.dropna().tolist()}
    if len(keys) < 2:
        raise DataError(
            f"target column '{target.name}' has {len(keys)} class(es) in the training split; "
            "model.task multiclass needs at least 2"
        )
    return tuple(sorted(keys, key=_class_order))


def encode_target(
    task: str, target: pd.Series, classes: Sequence[str] = (), split: str = "training"
) -> np.ndarray:
    """The target for the loss and the metrics; DataError naming the column and split."""
    name = target.name
    if target.isna().any():
        raise DataError(f"target column '{name}' has missing values in the {split} split")
    if task == "multiclass":
        lookup = {c: i for i, c in enumerate(classes)}
        keys = [category_key(v) for v in target.tolist()]
        unknown = sorted({k for k in keys if k not in lookup})
        if unknown:
            raise DataError(
                f"target column '{name}' holds class(es) {', '.join(unknown[:5])} in the {split} "
                f"split that the training split does not have ({', '.join(classes)})"
            )
        return np.array([lookup[k] for k in keys], dtype=np.int64)
    if not pd.api.types.is_numeric_dtype(target):
        raise DataError(
            f"target column '{name}' is not numeric (dtype {target.dtype}); "
            f"a {task} target must be {'0/1' if task == 'binary' else 'numbers'}"
        )
    values = target.to_numpy(dtype=np.float64)
    if not np.isfinite(values).all():
        raise DataError(f"target column '{name}' has infinite values in the {split} split")
    if task == "binary":
        odd = sorted(set(np.unique(values)) - {0.0, 1.0})
        if odd:
            raise DataError(
                f"target column '{name}' holds {odd[:5]} in the {split} split; a binary "
                "target is 0/1 (set model.task: multiclass for labels)"
            )
    return values
