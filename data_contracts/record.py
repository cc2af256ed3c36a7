"""A per-record validator for serving, compiled from the same contract as the GX suite.

The inference service checks every request; Great Expectations is far too slow for
that (and seconds to import), so :class:`RecordValidator` compiles each column's rules
into a few plain Python comparisons. It imports neither GX nor pandas machinery.

Semantics, shared with :func:`data_contracts.batch.validate_batch`: a record's value is
an error exactly when GX would count that row as unexpected for one of the row-level
rules (``dtype``, ``nulls``, ``range``, ``finite``, ``categories``), with one
exception, nulls. A null share is a property of a batch: a column whose contract
tolerates some (``max_null_share`` above 0, or ``nullable: true``) accepts a null
record, and the share is bounded where there is a batch (``validate_batch``, the
``contract:nulls`` monitor on a window). Refusing every null there turned a tolerated
10% share into per-record refusals (the model learns missing values it was trained
with, see ``training.model``). A column with ``nullable: false`` (or share 0) refuses
a null record. ``max_out_of_range_share`` does not excuse a value here: an
out-of-range value is wrong in itself. A required field that is absent is an error; an
extra field is one when the contract forbids extra columns. Rules about a whole batch
(``row_count``, ``unique``) are not checked per record.

One deliberate difference: booleans are not numbers here, while GX, which uses
``isinstance``, accepts ``True`` as an int inside an ``object`` column.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

import numpy as np
import pandas as pd

from driftgate.data_contracts.model import ColumnSpec, Contract, rule_id

_NUMERIC_TYPES = (int, float, np.integer, np.floating)
_BOOL_TYPES = (bool, np.bool_)
# Types per dtype, mirroring the Python/numpy types GX resolves for object columns
# (data_contracts.gx_suite.GX_TYPE_LISTS).
_ACCEPTED_TYPES: dict[str, tuple[type, ...]] = {
    "float": _NUMERIC_TYPES,
    "int": (int, np.integer),
    "bool": _BOOL_TYPES,
    "string": (str,),
    "datetime": (pd.Timestamp, np.datetime64, dt.datetime),
}


class RecordError(NamedTuple):
    """Why one field of a record breaks the contract.

    Attributes:
        field: The field (column) name.
        reason: What is wrong, for the caller's error response.
        rule: The contract rule id it breaks (``columns.<field>.<kind>``).
    """

    field: str
    reason: str
    rule: str = ""


def is_null(value: Any) -> bool:
    """Null as pandas (and so GX) sees a scalar: None, NaN, NaT or pd.NA."""
    if value is None or value is pd.NaT or value is pd.NA:
        return True
    if isinstance(value, float | np.floating):
        return value != value
    if isinstance(value, np.datetime64):
        return bool(np.isnat(value))
    return False


class _FieldCheck:
    """The compiled rules of one column."""

    __slots__ = (
        "categories",
        "categories_text",
        "check_finite",
        "dtype",
        "high",
        "low",
        "name",
        "null_reason",
        "range_text",
        "required",
        "types",
    )

    def __init__(self, name: str, spec: ColumnSpec) -> None:
        self.name = name
        self.required = spec.required
        self.dtype = spec.dtype
        self.types = _ACCEPTED_TYPES[spec.dtype]
        # Any tolerated share accepts a null record: the share bounds a batch, not a
        # record (module docstring).
        tolerated = spec.allowed_null_share > 0.0 or spec.nullable is True
        self.null_reason = None if tolerated else "null not allowed"
        # Missing bounds are infinite, so -inf passes a max-only range as it does in GX.
        self.low = spec.min if spec.min is not None else -math.inf
        self.high = spec.max if spec.max is not None else math.inf
        self.range_text = f"[{spec.min}, {spec.max}]" if spec.has_range else ""
        self.check_finite = not spec.has_range and spec.dtype == "float" and not spec.allow_infinite
        checked = spec.categories is not None and spec.unseen == "reject"
        self.categories = frozenset(spec.categories) if checked else None
        self.categories_text = repr(spec.categories)

    def check(self, value: Any) -> tuple[str, str] | None:
        """``(rule kind, reason)`` for the first rule ``value`` breaks, else None."""
        if is_null(value):
            return ("nulls", self.null_reason) if self.null_reason else None
        if not isinstance(value, self.types) or (
            self.dtype != "bool" and isinstance(value, _BOOL_TYPES)
        ):
            return "dtype", f"expected {self.dtype}, got {type(value).__name__} {value!r:.40}"
        if self.range_text and not (self.low <= value <= self.high):
            return "range", f"value {value!r} outside {self.range_text}"
        # Only floats can be infinite (math.isinf would overflow on a huge int).
        if self.check_finite and isinstance(value, float | np.floating) and math.isinf(value):
            return "finite", f"infinite value {value!r}"
        if self.categories is not None and value not in self.categories:
            return "categories", f"value {value!r} not in categories {self.categories_text}"
        return None


class RecordValidator:
    """Validates single records (mappings of field to value) against a contract."""

    def __init__(self, contract: Contract) -> None:
        self.contract_name = contract.name
        self._fields = tuple(_FieldCheck(name, spec) for name, spec in contract.columns.items())
        self._known = frozenset(contract.columns)
        self._forbid_extra = contract.extra_columns == "forbid"

    @classmethod
    def from_contract(cls, contract: Contract) -> RecordValidator:
        """Compile ``contract`` once; :meth:`validate` then costs microseconds."""
        return cls(contract)

    def validate(self, record: Mapping[str, Any]) -> list[RecordError]:
        """Every broken field of ``record`` (at most one reason per field); [] if valid."""
        errors: list[RecordError] = []
        for field in self._fields:
            try:
                value = record[field.name]
            except KeyError:
                if field.required:
                    errors.append(
                        RecordError(field.name, "missing: required", rule_id("exists", field.name))
                    )
                continue
            broken = field.check(value)
            if broken is not None:
                errors.append(RecordError(field.name, broken[1], rule_id(broken[0], field.name)))
        if self._forbid_extra:
            extras = record.keys() - self._known
            errors.extend(
                RecordError(str(name), "not in the contract", "table.extra_columns")
                for name in sorted(extras, key=str)
            )
        return errors

    def is_valid(self, record: Mapping[str, Any]) -> bool:
        return not self.validate(record)

    def validate_many(
        self, records: list[Mapping[str, Any]]
    ) -> list[tuple[int, list[RecordError]]]:
        """``(position, errors)`` for every invalid record of ``records``."""
        check: Callable[[Mapping[str, Any]], list[RecordError]] = self.validate
        return [(i, errs) for i, record in enumerate(records) if (errs := check(record))]
