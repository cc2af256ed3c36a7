"""Validate a batch (a DataFrame) against a contract with Great Expectations.

:func:`validate_batch` runs the contract's suite once and turns GX's results into one
:class:`RuleResult` per rule. It never raises on bad data: a missing column, a wrong
dtype, strings among numbers, infinities or zero rows become failed rules whose
message names the column. Rules that cannot be judged because their column is absent
or has the wrong type are *skipped* (``passed=False, skipped=True``), so a renamed
column fails its ``exists`` rule only, not every rule of that column.
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from driftgate.data_contracts.model import Contract, Rule, rule_kind

DEFAULT_MAX_EXAMPLES = 5
# Rules that compare values and so mean nothing once the dtype rule failed (comparing
# strings with a float bound raises). Nulls and uniqueness are judged regardless.
_NEED_DTYPE = ("range", "finite", "categories")


@dataclass(frozen=True)
class RuleResult:
    """The outcome of one rule on one batch.

    Attributes:
        rule: Rule id, e.g. ``columns.temperature.nulls``.
        column: The column the rule is about (None for table rules).
        passed: True when the rule was checked and holds.
        observed: What was measured (a share, a dtype, a row count, min/max, ...).
        expected: What the contract promises, in words.
        unexpected_share: Share of checked values breaking the rule (None if not a
            per-value rule). Nulls are a share of all rows; other per-value rules are a
            share of non-null values, as in GX.
        examples: A few failing rows, ``{"row": index label, "value": value}``.
        message: One sentence for people, naming the column.
        skipped: True when the rule could not be judged (column absent or mistyped).
        expectation: The GX expectation type that checked it.
    """

    rule: str
    column: str | None
    passed: bool
    observed: Any
    expected: str
    unexpected_share: float | None
    examples: list[dict[str, Any]]
    message: str
    skipped: bool = False
    expectation: str | None = None

    @property
    def kind(self) -> str:
        """The rule kind (``nulls``, ``range``, ...): what ``contract:<kind>`` refers to."""
        return rule_kind(self.rule)

    @property
    def failed(self) -> bool:
        return not self.passed and not self.skipped


@dataclass(frozen=True)
class ContractResult:
    """Every rule's outcome on one batch; ``passed`` when no rule failed."""

    contract: str
    version: int
    row_count: int
    rules: list[RuleResult]
    seconds: float = 0.0
    columns: list[str] = field(default_factory=list)
    # What computed the rules' outcomes: Great Expectations, or for a numeric window of
    # a drift check the columnar equivalent (data_contracts/columnar.py).
    engine: str = "great_expectations"

    @property
    def passed(self) -> bool:
        return not self.failures

    @property
    def failures(self) -> list[RuleResult]:
        return [result for result in self.rules if result.failed]

    @property
    def skipped(self) -> list[RuleResult]:
        return [result for result in self.rules if result.skipped]

    def rule(self, rule: str) -> RuleResult:
        """The result of one rule by id (KeyError listing the known ids)."""
        for result in self.rules:
            if result.rule == rule:
                return result
        raise KeyError(f"no rule {rule!r}; known: {', '.join(r.rule for r in self.rules)}")

    def failed_kinds(self) -> dict[str, int]:
        """Number of failed rules per kind, the input of a ``contract:<kind>`` gate."""
        counts: dict[str, int] = {}
        for result in self.failures:
            counts[result.kind] = counts.get(result.kind, 0) + 1
        return counts

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able summary (non-finite floats become the strings "nan"/"inf")."""
        return {
            "contract": self.contract,
            "version": self.version,
            "passed": self.passed,
            "row_count": self.row_count,
            "columns": list(self.columns),
            "seconds": round(self.seconds, 4),
            "engine": self.engine,
            "failed_rules": [r.rule for r in self.failures],
            "rules": [
                _jsonable(asdict(result) | {"kind": result.kind, "failed": result.failed})
                for result in self.rules
            ],
        }


def validate_batch(
    contract: Contract,
    frame: pd.DataFrame,
    max_examples: int = DEFAULT_MAX_EXAMPLES,
    *,
    row_count: int | None = None,
    engine: str = "great_expectations",
) -> ContractResult:
    """Check ``frame`` against ``contract`` with Great Expectations.

    Args:
        contract: The contract to enforce.
        frame: The batch; any content, including none.
        max_examples: Failing rows to keep per rule.
        row_count: The rows of the batch ``frame`` is an even sample of (a window too
            large to validate whole): the row-count rule judges this count; every other
            rule judges the sample. Default: ``len(frame)``.
        engine: ``great_expectations`` (the default: ``contract validate``, training,
            promotion), or ``auto``: where :func:`data_contracts.columnar.supported`
            holds (a window of plain numbers; the drift check), the columnar results
            that equal GX's without importing it, else GX.

    Returns:
        One result per rule of ``contract.rules()``, in that order.
    """
    from driftgate.data_contracts import columnar

    started = time.perf_counter()
    if not frame.columns.is_unique:
        # GX (and pandas column selection) cannot tell duplicated names apart.
        frame = frame.loc[:, ~frame.columns.duplicated()]
    frame = _in_contract_types(frame)
    rules = contract.rules()
    if engine == "auto" and columnar.supported(contract, frame):
        engine = "columnar"
        results = columnar.columnar_results(contract, frame, max_examples)
        by_rule, crash = {r.expectation_config.meta["rule"]: r for r in results}, None
    else:
        engine = "great_expectations"
        by_rule, crash = _gx_results(contract, frame, max_examples)
    interpreter = _Interpreter(contract, frame, max_examples)
    interpreter.row_count = len(frame) if row_count is None else int(row_count)
    results = [interpreter.interpret(rule, by_rule.get(rule.id), crash) for rule in rules]
    return ContractResult(
        contract=contract.name,
        version=contract.version,
        row_count=interpreter.row_count,
        rules=results,
        seconds=time.perf_counter() - started,
        columns=[str(c) for c in frame.columns],
        engine=engine,
    )


def _gx_results(contract: Contract, frame: pd.DataFrame, max_examples: int):
    """GX's result per rule id, or the error that stopped GX."""
    # Imported here: GX costs seconds to import, and importing data_contracts (the
    # serving path uses only RecordValidator) should not pay for it.
    from driftgate.data_contracts.gx_suite import compile_suite, gx_runtime, result_format

    try:
        gx_result = gx_runtime().validate(
            frame, compile_suite(contract), result_format(max_examples)
        )
        return {r.expectation_config.meta.get("rule"): r for r in gx_result.results}, None
    except Exception as exc:  # a GX bug on odd data must become a report, not a crash
        return {}, f"{type(exc).__name__}: {exc}"


def _in_contract_types(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with each column in the type the contract names, where pandas has
    several for one: GX judges a typed column by its dtype name.

    - a ``category`` column is its values (a category of strings is a string column;
      its dtype name is ``category`` whatever its levels);
    - a time-zone-aware datetime (``datetime64[ns, UTC]``, a fixed offset, a named zone)
      is the same instants in UTC without a zone: the contract's ``datetime`` is an
      instant, and a file whose times carry a zone failed the contract inferred from it
      (``has dtype datetime64[ns, UTC], expected datetime``).
    """
    converted = {}
    for column in frame.columns:
        values = frame[column]
        if isinstance(values.dtype, pd.CategoricalDtype):
            levels = values.cat.categories.dtype
            if values.isna().any() or not pd.api.types.is_numeric_dtype(levels):
                converted[column] = values.astype(object).where(values.notna(), None)
            else:
                converted[column] = values.astype(levels)
        elif isinstance(values.dtype, pd.DatetimeTZDtype):
            converted[column] = values.dt.tz_convert("UTC").dt.tz_localize(None)
    if not converted:
        return frame
    frame = frame.copy()
    for column, values in converted.items():
        frame[column] = values
    return frame


class _Interpreter:
    """Turns GX expectation results into RuleResults, in the contract's words."""

    def __init__(self, contract: Contract, frame: pd.DataFrame, max_examples: int) -> None:
        self.contract = contract
        self.frame = frame
        self.row_count = len(frame)
        self.max_examples = max_examples
        # Contract columns are strings; a non-string label (0, a tuple) can only be extra.
        self.present = {c for c in frame.columns if isinstance(c, str)}
        self.extras = sorted(str(c) for c in frame.columns if str(c) not in contract.columns)
        self.bad_dtype: set[str] = set()  # filled as dtype rules are read (they come first)

    def interpret(self, rule: Rule, gx_result: Any, crash: str | None) -> RuleResult:
        expected = self._expected(rule)
        name = _expectation_name(gx_result)
        column = rule.column
        if rule.kind == "row_count":
            return self._row_count(rule, expected, name)
        if rule.kind == "extra_columns":
            return self._extra_columns(rule, expected, name)
        assert column is not None
        spec = self.contract.columns[column]
        if rule.kind == "exists":
            if column in self.present:
                return _result(rule, True, "present", expected, f"column '{column}' is present")
            if not spec.required:
                return _result(
                    rule, True, "absent", expected, f"optional column '{column}' is absent"
                )
            return _result(
                rule,
                False,
                "absent",
                expected,
                f"required column '{column}' is missing",
                expectation=name,
            )
        if column not in self.present:
            return _skip(rule, expected, f"not checked: column '{column}' is absent")
        if column in self.bad_dtype and rule.kind in _NEED_DTYPE:
            return _skip(
                rule, expected, f"not checked: column '{column}' does not hold {spec.dtype} values"
            )
        if crash is not None or gx_result is None:
            reason = crash or "Great Expectations returned no result"
            return _result(
                rule, False, None, expected, f"column '{column}': {reason}", expectation=name
            )
        raised = _exception_message(gx_result)
        if raised is not None:
            if rule.kind == "dtype":
                self.bad_dtype.add(column)
            return _result(
                rule,
                False,
                None,
                expected,
                f"column '{column}' could not be checked for {rule.kind}: {raised}",
                expectation=name,
            )
        details = gx_result.result or {}
        passed = bool(gx_result.success)
        share = _unexpected_share(rule.kind, details)
        examples = _examples(details, self.max_examples)
        observed = self._observed(rule, details, share)
        if rule.kind == "dtype" and not passed:
            self.bad_dtype.add(column)
        message = self._message(rule, passed, observed, share, examples, details)
        return RuleResult(
            rule=rule.id,
            column=column,
            passed=passed,
            observed=observed,
            expected=expected,
            unexpected_share=share,
            examples=examples,
            message=message,
            expectation=name,
        )

    def _row_count(self, rule: Rule, expected: str, name: str | None) -> RuleResult:
        # Counted here rather than read from GX: it is exact, free, and works even if
        # GX could not run at all.
        count = self.row_count
        low, high = self.contract.rows.min, self.contract.rows.max
        passed = count >= low and (high is None or count <= high)
        message = f"table has {count} rows" + ("" if passed else f", expected {expected}")
        return _result(rule, passed, count, expected, message, expectation=name)

    def _extra_columns(self, rule: Rule, expected: str, name: str | None) -> RuleResult:
        extras = self.extras
        if not extras:
            return _result(rule, True, [], expected, "no columns outside the contract")
        listed = ", ".join(f"'{c}'" for c in extras)
        return _result(
            rule,
            False,
            extras,
            expected,
            f"column(s) {listed} not in the contract (extra_columns: forbid)",
            expectation=name,
        )

    def _expected(self, rule: Rule) -> str:
        if rule.kind == "row_count":
            rows = self.contract.rows
            return f"at least {rows.min} row(s)" + (
                f", at most {rows.max}" if rows.max is not None else ""
            )
        if rule.kind == "extra_columns":
            return "only the contract's columns"
        assert rule.column is not None
        spec = self.contract.columns[rule.column]
        if rule.kind == "exists":
            return "present" if spec.required else "present or absent (optional)"
        if rule.kind == "dtype":
            return f"{spec.dtype} values"
        if rule.kind == "nulls":
            share = spec.allowed_null_share
            return "no nulls" if share == 0 else f"at most {_percent(share)} nulls"
        if rule.kind == "range":
            bounds = _bounds_text(spec.min, spec.max)
            tolerance = spec.max_out_of_range_share
            return bounds + (f" (at most {_percent(tolerance)} outside)" if tolerance else "")
        if rule.kind == "finite":
            return "no infinite values"
        if rule.kind == "categories":
            return "one of " + ", ".join(repr(v) for v in spec.categories or [])
        if rule.kind == "unique":
            return "no duplicated values"
        return rule.kind

    def _observed(self, rule: Rule, details: dict, share: float | None) -> Any:
        column = self.frame[rule.column]
        if rule.kind == "dtype":
            return str(column.dtype)
        if rule.kind == "range" and pd.api.types.is_numeric_dtype(column) and len(column):
            values = column.to_numpy(dtype=np.float64, na_value=np.nan)
            if np.isnan(values).all():
                return {"min": None, "max": None}
            return {"min": float(np.nanmin(values)), "max": float(np.nanmax(values))}
        if rule.kind == "categories":
            counts = details.get("partial_unexpected_counts") or []
            return {"unseen": [item["value"] for item in counts]}
        if rule.kind == "unique":
            return {"duplicated_rows": int(details.get("unexpected_count") or 0)}
        return share

    def _message(
        self,
        rule: Rule,
        passed: bool,
        observed: Any,
        share: float | None,
        examples: list[dict],
        details: dict,
    ) -> str:
        column = rule.column
        spec = self.contract.columns[column]  # type: ignore[index]
        count = int(details.get("unexpected_count") or 0)
        sample = _example_text(examples)
        if rule.kind == "dtype":
            if passed:
                return f"column '{column}' holds {spec.dtype} values (dtype {observed})"
            if details.get("unexpected_count") is None:  # typed column: judged by dtype
                return f"column '{column}' has dtype {observed}, expected {spec.dtype}"
            return (
                f"column '{column}' (dtype {observed}) has {count} value(s) that are not "
                f"{spec.dtype} ({_percent(share)} of non-null values){sample}"
            )
        if rule.kind == "nulls":
            limit = _percent(spec.allowed_null_share)
            if count == 0:
                return f"column '{column}' has no nulls"
            return (
                f"column '{column}' has {_percent(share)} nulls ({count} rows), "
                f"at most {limit} allowed"
            )
        if rule.kind == "range":
            text = (
                f"column '{column}' has {_percent(share)} of values ({count}) outside "
                f"{_bounds_text(spec.min, spec.max)}, at most "
                f"{_percent(spec.max_out_of_range_share)} allowed"
            )
            if isinstance(observed, dict) and observed.get("min") is not None:
                text += f"; observed min {observed['min']:.4g}, max {observed['max']:.4g}"
            return text + ("" if passed else sample)
        if rule.kind == "finite":
            return f"column '{column}' has {count} infinite value(s){sample}"
        if rule.kind == "categories":
            if passed:
                return f"column '{column}' holds only allowed categories"
            unseen = ", ".join(repr(v) for v in observed["unseen"])
            return (
                f"column '{column}' has {count} value(s) outside the allowed "
                f"categories: {unseen}{sample}"
            )
        if rule.kind == "unique":
            return f"column '{column}' has {count} rows with duplicated values{sample}"
        return f"column '{column}': {rule.kind} {'passed' if passed else 'failed'}"


def _result(
    rule: Rule,
    passed: bool,
    observed: Any,
    expected: str,
    message: str,
    expectation: str | None = None,
) -> RuleResult:
    return RuleResult(
        rule=rule.id,
        column=rule.column,
        passed=passed,
        observed=observed,
        expected=expected,
        unexpected_share=None,
        examples=[],
        message=message,
        expectation=expectation,
    )


def _skip(rule: Rule, expected: str, message: str) -> RuleResult:
    return RuleResult(
        rule=rule.id,
        column=rule.column,
        passed=False,
        observed=None,
        expected=expected,
        unexpected_share=None,
        examples=[],
        message=message,
        skipped=True,
    )


def _expectation_name(gx_result: Any) -> str | None:
    if gx_result is None:
        return None
    return gx_result.expectation_config.type


def _exception_message(gx_result: Any) -> str | None:
    """The first exception GX caught for this expectation, if any.

    GX reports it either flat (``{"raised_exception": True, "exception_message": ...}``)
    or keyed by the metric that failed; both shapes are searched.
    """
    info = gx_result.exception_info or {}
    stack = [info]
    while stack:
        item = stack.pop()
        if not isinstance(item, dict):
            continue
        if item.get("raised_exception") and item.get("exception_message"):
            return str(item["exception_message"]).strip().splitlines()[-1][:300]
        stack.extend(value for value in item.values() if isinstance(value, dict))
    return None


def _unexpected_share(kind: str, details: dict) -> float | None:
    count = details.get("unexpected_count")
    if count is None:
        return None
    if kind == "nulls":
        total = details.get("element_count") or 0
    else:
        total = (details.get("element_count") or 0) - (details.get("missing_count") or 0)
    return count / total if total else 0.0


def _examples(details: dict, max_examples: int) -> list[dict[str, Any]]:
    rows = details.get("partial_unexpected_index_list") or []
    values = details.get("partial_unexpected_list") or []
    return [
        {"row": _jsonable(row), "value": _jsonable(value)}
        for row, value in list(zip(rows, values, strict=False))[:max_examples]
    ]


def _example_text(examples: list[dict]) -> str:
    if not examples:
        return ""
    shown = ", ".join(f"{e['value']!r} at row {e['row']}" for e in examples[:3])
    return f"; e.g. {shown}"


def _percent(share: float | None) -> str:
    if share is None:
        return "n/a"
    text = f"{share * 100:.2f}".rstrip("0").rstrip(".")
    return f"{text}%"


def _bounds_text(low: float | None, high: float | None) -> str:
    if low is not None and high is not None:
        return f"[{low:g}, {high:g}]"
    if low is not None:
        return f">= {low:g}"
    return f"<= {high:g}"


def _jsonable(value: Any) -> Any:
    """Plain Python values for JSON: numpy scalars unwrapped, NaN/inf as strings."""
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    if isinstance(value, pd.Timestamp | np.datetime64):
        return str(value)
    if value is pd.NaT or value is pd.NA:
        return None
    if value is None or isinstance(value, bool | int | float | str):
        return value
    return str(value)
