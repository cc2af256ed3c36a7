"""The contract's verdict on a numeric window without Great Expectations (issue 32).

Great Expectations costs 1.2 s to import (quiet machine) and a 30-row ``drift-check``
in a fresh process paid it for a window of plain numbers. For such a window,
:func:`columnar_results` computes what GX's expectations report (counts, the first
failing values and their rows, success under ``mostly``) with numpy, in GX's result
shape, and :func:`data_contracts.batch.validate_batch` reads them through the same
interpreter as GX's own results: the same rules, messages, shares and examples.

Only where that equality is established (``tests/data_contracts/test_columnar.py``
compares whole results with GX's on random and edge-case windows): every contract
column present in the frame has a float or int numpy dtype and the contract calls it
``float`` or ``int``; no ``categories`` or ``unique`` rule applies to a present column.
Anything else returns None and GX judges the batch. ``contract validate``, training
and promotion always use GX; a result says which engine judged it (``engine``).

GX's rules reproduced here (great_expectations 1.x, ``expectation.py``): a per-value
rule counts non-null values only and succeeds when there are none, else when
``(nonnull - unexpected) / nonnull >= mostly``; the null rule counts every row; a typed
column's dtype rule compares the dtype's name with the type list.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from driftgate.data_contracts.model import Contract, Rule

# The numpy dtypes judged here, and the contract dtypes whose GX type list names them
# (data_contracts.gx_suite.GX_TYPE_LISTS, without importing GX).
_FLOAT_DTYPES = ("float64", "float32")
_INT_DTYPES = ("int64", "int32")
_ACCEPTS = {"float": _FLOAT_DTYPES + _INT_DTYPES, "int": _INT_DTYPES}

_EXPECTATION = {
    "row_count": "expect_table_row_count_to_be_between",
    "extra_columns": "expect_table_columns_to_match_set",
    "exists": "expect_column_to_exist",
    "dtype": "expect_column_values_to_be_in_type_list",
    "nulls": "expect_column_values_to_not_be_null",
    "range": "expect_column_values_to_be_between",
    "finite": "expect_column_values_to_not_be_in_set",
}


@dataclass
class _Config:
    type: str
    meta: dict = field(default_factory=dict)


@dataclass
class _Result:
    """The attributes of a GX ExpectationValidationResult the interpreter reads."""

    expectation_config: _Config
    success: bool
    result: dict
    exception_info: dict = field(default_factory=dict)


def supported(contract: Contract, frame: pd.DataFrame) -> bool:
    """Whether :func:`columnar_results` gives GX's results for this batch (see above)."""
    for name, spec in contract.columns.items():
        if name not in frame.columns:
            continue
        if spec.dtype not in _ACCEPTS or str(frame[name].dtype) not in _FLOAT_DTYPES + _INT_DTYPES:
            return False
        if spec.categories is not None or spec.unique:
            return False
    # An absent column's rules are judged from the frame (skipped, or a missing
    # required column), whatever their kind.
    return all(
        rule.kind in _EXPECTATION or rule.column not in frame.columns for rule in contract.rules()
    )


def columnar_results(contract: Contract, frame: pd.DataFrame, max_examples: int) -> list:
    """GX-shaped results, one per rule, for a batch :func:`supported` accepts."""
    return [_result(rule, contract, frame, max_examples) for rule in contract.rules()]


def _result(rule: Rule, contract: Contract, frame: pd.DataFrame, max_examples: int) -> _Result:
    config = _Config(_EXPECTATION.get(rule.kind, rule.kind), {"rule": rule.id})
    if rule.column is None or rule.column not in frame.columns or rule.kind == "exists":
        # Table rules, and the rules of an absent column: the interpreter judges these
        # from the frame itself and reads only the expectation's name.
        return _Result(config, rule.column is None or rule.column in frame.columns, {})
    spec = contract.columns[rule.column]
    values = frame[rule.column].to_numpy()
    if rule.kind == "dtype":
        dtype = str(frame[rule.column].dtype)
        return _Result(config, dtype in _ACCEPTS[spec.dtype], {"observed_value": dtype})
    missing = np.isnan(values) if values.dtype.kind == "f" else np.zeros(len(values), bool)
    if rule.kind == "nulls":
        return _map_result(
            config, frame, values, missing, len(values), None, 1.0 - spec.allowed_null_share,
            max_examples,
        )  # fmt: skip
    present = ~missing
    with np.errstate(invalid="ignore"):
        if rule.kind == "range":
            unexpected = np.zeros(len(values), bool)
            if spec.min is not None:
                unexpected |= values < spec.min
            if spec.max is not None:
                unexpected |= values > spec.max
            mostly = 1.0 - spec.max_out_of_range_share
        else:  # finite
            finite_kind = values.dtype.kind == "f"
            unexpected = np.isinf(values) if finite_kind else np.zeros(len(values), bool)
            mostly = 1.0
    unexpected &= present
    return _map_result(
        config, frame, values, unexpected, len(values), int(present.sum()), mostly, max_examples
    )


def _map_result(
    config: _Config,
    frame: pd.DataFrame,
    values: np.ndarray,
    unexpected: np.ndarray,
    total: int,
    nonnull: int | None,
    mostly: float,
    max_examples: int,
) -> _Result:
    count = int(unexpected.sum())
    considered = total if nonnull is None else nonnull
    if considered == 0:
        success = True  # GX: vacuously true
    else:
        success = (float(considered) - float(count)) / float(considered) >= mostly
    positions = np.flatnonzero(unexpected)[:max_examples]
    result: dict[str, Any] = {
        "element_count": total,
        "unexpected_count": count,
        "partial_unexpected_list": [values[i].item() for i in positions],
        "partial_unexpected_index_list": frame.index[positions].tolist(),
    }
    if nonnull is not None:
        result["missing_count"] = total - nonnull
    return _Result(config, success, result)
