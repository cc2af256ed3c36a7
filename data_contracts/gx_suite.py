"""Compile a contract to a Great Expectations 1.x ExpectationSuite and run it.

Each rule of the contract becomes one expectation whose ``meta["rule"]`` holds the rule
id, so a GX result maps back to the rule without relying on result order. The suite is
plain GX: it can be saved, shown in Data Docs or run by GX alone (the benchmark does).

Great Expectations takes seconds to import, so this module is imported lazily by
:func:`data_contracts.batch.validate_batch`; the per-record validator never needs it.
One ephemeral context (in memory, no analytics, no progress bars) is created per
process on first use and shared: creating contexts repeatedly costs time.
"""

from __future__ import annotations

import threading
from typing import Any

import great_expectations as gx
import pandas as pd
from great_expectations.core.expectation_validation_result import (
    ExpectationSuiteValidationResult,
)
from great_expectations.data_context.types.base import (
    DataContextConfig,
    InMemoryStoreBackendDefaults,
    ProgressBarsConfig,
)

from driftgate.data_contracts.model import ColumnSpec, Contract, Rule

# GX type names per contract dtype. For a typed pandas column GX compares the column's
# dtype against these; for an ``object`` column it checks every value with isinstance
# against the numpy scalar types and Python types the names resolve to ("float" ->
# float and numpy.float64, "int" -> int and numpy.int64, ...). Float columns accept
# integers: JSON and CSV writers drop the ".0" freely.
_INT_TYPES = [
    "int",
    "int64",
    "int32",
    "int16",
    "int8",
    "uint64",
    "uint32",
    "uint16",
    "uint8",
    "Int64Dtype",
    "Int32Dtype",
    "Int16Dtype",
    "Int8Dtype",
    "UInt64Dtype",
    "UInt32Dtype",
    "UInt16Dtype",
    "UInt8Dtype",
]
GX_TYPE_LISTS: dict[str, list[str]] = {
    "float": [
        "float",
        "float64",
        "float32",
        "float16",
        "Float64Dtype",
        "Float32Dtype",
        *_INT_TYPES,
    ],
    "int": _INT_TYPES,
    "bool": ["bool", "BooleanDtype"],
    "string": ["str", "StringDtype"],
    "datetime": [
        "datetime64[ns]",
        "datetime64[us]",
        "datetime64[ms]",
        "datetime64[s]",
        "Timestamp",
        "DatetimeTZDtype",
    ],
}

_runtime_lock = threading.Lock()
_runtime: _GxRuntime | None = None


class _GxRuntime:
    """One ephemeral GX context with a pandas whole-dataframe batch definition."""

    def __init__(self) -> None:
        config = DataContextConfig(
            store_backend_defaults=InMemoryStoreBackendDefaults(),
            analytics_enabled=False,
            progress_bars=ProgressBarsConfig(globally=False, metric_calculations=False),
        )
        self.context = gx.get_context(project_config=config, mode="ephemeral")
        source = self.context.data_sources.add_pandas("driftgate")
        asset = source.add_dataframe_asset("batch")
        self.batch_definition = asset.add_batch_definition_whole_dataframe("whole_frame")
        # The batch definition is shared; GX is not documented as thread-safe.
        self.lock = threading.Lock()

    def validate(
        self, frame: pd.DataFrame, suite: gx.ExpectationSuite, result_format: dict
    ) -> ExpectationSuiteValidationResult:
        with self.lock:
            batch = self.batch_definition.get_batch(batch_parameters={"dataframe": frame})
            return batch.validate(suite, result_format=result_format)


def gx_runtime() -> _GxRuntime:
    """The process-wide GX context, created on first use."""
    global _runtime
    with _runtime_lock:
        if _runtime is None:
            _runtime = _GxRuntime()
        return _runtime


def result_format(max_examples: int) -> dict[str, Any]:
    """GX's SUMMARY format: counts plus the first ``max_examples`` failing values and rows."""
    return {"result_format": "SUMMARY", "partial_unexpected_count": max_examples}


def compile_suite(contract: Contract) -> gx.ExpectationSuite:
    """The contract as an ExpectationSuite named after it, one expectation per rule."""
    gx_runtime()  # GX suites resolve a current context even when never saved
    expectations = []
    for rule in contract.rules():
        spec = contract.columns[rule.column] if rule.column is not None else None
        expectations.append(_expectation_for(rule, contract, spec))
    # Passed to the constructor rather than add_expectation(), which looks the suite up
    # in the store once per expectation.
    return gx.ExpectationSuite(
        name=f"{contract.name}.v{contract.version}", expectations=expectations
    )


def _expectation_for(rule: Rule, contract: Contract, spec: ColumnSpec | None) -> Any:
    meta = {"rule": rule.id}
    expectations = gx.expectations
    if rule.kind == "row_count":
        return expectations.ExpectTableRowCountToBeBetween(
            min_value=contract.rows.min, max_value=contract.rows.max, meta=meta
        )
    if rule.kind == "extra_columns":
        # exact_match also fails on absent columns; driftgate reads only the extras
        # from the observed columns, absent columns are the `exists` rules' business.
        return expectations.ExpectTableColumnsToMatchSet(
            column_set=list(contract.columns), exact_match=True, meta=meta
        )
    assert spec is not None and rule.column is not None
    column = rule.column
    if rule.kind == "exists":
        return expectations.ExpectColumnToExist(column=column, meta=meta)
    if rule.kind == "dtype":
        return expectations.ExpectColumnValuesToBeInTypeList(
            column=column, type_list=GX_TYPE_LISTS[spec.dtype], meta=meta
        )
    if rule.kind == "nulls":
        return expectations.ExpectColumnValuesToNotBeNull(
            column=column, mostly=1.0 - spec.allowed_null_share, meta=meta
        )
    if rule.kind == "range":
        return expectations.ExpectColumnValuesToBeBetween(
            column=column,
            min_value=spec.min,
            max_value=spec.max,
            mostly=1.0 - spec.max_out_of_range_share,
            meta=meta,
        )
    if rule.kind == "finite":
        return expectations.ExpectColumnValuesToNotBeInSet(
            column=column, value_set=[float("inf"), float("-inf")], meta=meta
        )
    if rule.kind == "categories":
        return expectations.ExpectColumnValuesToBeInSet(
            column=column, value_set=list(spec.categories or []), meta=meta
        )
    if rule.kind == "unique":
        return expectations.ExpectColumnValuesToBeUnique(column=column, meta=meta)
    raise ValueError(f"no expectation for rule kind {rule.kind!r}")
