"""Batch validation with Great Expectations on the real demo data.

Each injected fault must fail exactly the rule it breaks, with a message naming the
column; rules that cannot be judged (absent or mistyped column) are skipped, not failed.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from driftgate.data_contracts import (
    Contract,
    ContractResult,
    render_html,
    render_markdown,
    validate_batch,
)
from driftgate.training.data import Splits

from .conftest import with_column


def failed_rules(result: ContractResult) -> set[str]:
    return {rule.rule for rule in result.failures}


def assert_message_names_column(result: ContractResult, column: str) -> None:
    for failure in result.failures:
        if failure.column == column or failure.rule == "table.extra_columns":
            assert f"'{column}'" in failure.message, failure.message


def test_committed_contract_passes_on_reference(contract: Contract, reference) -> None:
    result = validate_batch(contract, reference)
    assert result.passed, render_markdown(result)
    assert result.row_count == len(reference)
    assert len(result.rules) == len(contract.rules())
    assert not result.skipped


def test_committed_contract_passes_on_each_reference_split(
    contract: Contract, splits: Splits
) -> None:
    for part in (splits.train, splits.validation, splits.test):
        assert validate_batch(contract, part).passed


def test_in_distribution_production_start_passes(contract: Contract, splits: Splits) -> None:
    assert validate_batch(contract, splits.production.iloc[:1500]).passed


def test_drifted_production_fails_on_sea_level_pressure(contract: Contract, splits: Splits) -> None:
    result = validate_batch(contract, splits.production)
    assert "columns.sea_level_pressure.range" in failed_rules(result)


def test_serving_shaped_batch_without_label_and_date_passes(contract: Contract, reference) -> None:
    result = validate_batch(contract, reference.drop(columns=["rain", "date"]))
    assert result.passed
    assert result.rule("columns.rain.exists").observed == "absent"
    assert result.rule("columns.rain.categories").skipped


def test_renamed_column_fails_exists_and_extra_columns(contract: Contract, reference) -> None:
    result = validate_batch(contract, reference.rename(columns={"temperature": "temp"}))
    assert failed_rules(result) == {"columns.temperature.exists", "table.extra_columns"}
    assert "'temperature'" in result.rule("columns.temperature.exists").message
    assert "'temp'" in result.rule("table.extra_columns").message
    for kind in ("dtype", "nulls", "range"):
        assert result.rule(f"columns.temperature.{kind}").skipped


def test_renamed_column_with_extra_columns_allowed_fails_exists_only(
    contract: Contract, reference
) -> None:
    lenient = contract.model_copy(update={"extra_columns": "allow"})
    result = validate_batch(lenient, reference.rename(columns={"dew_point": "dewpoint"}))
    assert failed_rules(result) == {"columns.dew_point.exists"}


def test_column_cast_to_string_fails_dtype(contract: Contract, reference) -> None:
    frame = reference.assign(visibility=reference["visibility"].astype(str))
    result = validate_batch(contract, frame)
    assert failed_rules(result) == {"columns.visibility.dtype"}
    failure = result.rule("columns.visibility.dtype")
    assert "'visibility'" in failure.message and "float" in failure.message
    assert failure.unexpected_share == 1.0
    assert failure.examples and isinstance(failure.examples[0]["value"], str)
    assert result.rule("columns.visibility.range").skipped
    assert result.rule("columns.visibility.nulls").passed  # still judged


def test_a_few_strings_in_a_numeric_column_fail_dtype_with_examples(
    contract: Contract, reference
) -> None:
    frame = reference.copy()
    frame["dew_point"] = frame["dew_point"].astype(object)
    frame.loc[[5, 70, 900], "dew_point"] = "n/a"
    result = validate_batch(contract, frame)
    assert failed_rules(result) == {"columns.dew_point.dtype"}
    failure = result.rule("columns.dew_point.dtype")
    assert {e["row"] for e in failure.examples} == {5, 70, 900}
    assert failure.unexpected_share == pytest.approx(3 / len(frame))


@pytest.mark.parametrize(("share", "passes"), [(0.06, False), (0.04, True)])
def test_null_share_above_the_allowance_fails_nulls(
    contract: Contract, reference, share: float, passes: bool
) -> None:
    tolerant = with_column(contract, "temperature", nullable=None, max_null_share=0.05)
    frame = reference.copy()
    rows = np.random.default_rng(0).choice(len(frame), int(share * len(frame)), replace=False)
    frame.loc[frame.index[rows], "temperature"] = np.nan
    result = validate_batch(tolerant, frame)
    nulls = result.rule("columns.temperature.nulls")
    assert nulls.unexpected_share == pytest.approx(share)
    if passes:
        assert result.passed
    else:
        assert failed_rules(result) == {"columns.temperature.nulls"}
        assert "'temperature'" in nulls.message and "5%" in nulls.message


def test_values_outside_the_range_fail_range(contract: Contract, reference) -> None:
    frame = reference.copy()
    frame.loc[[10, 20, 30], "average_wind_speed"] = 25.0
    result = validate_batch(contract, frame)
    assert failed_rules(result) == {"columns.average_wind_speed.range"}
    failure = result.rule("columns.average_wind_speed.range")
    assert failure.observed["max"] == 25.0
    assert [e["row"] for e in failure.examples] == [10, 20, 30]
    assert "'average_wind_speed'" in failure.message


def test_range_tolerance_allows_a_small_share_only(contract: Contract, reference) -> None:
    # sea_level_pressure allows 0.1% outside (10 of 10,000 rows; 2 are already out).
    frame = reference.copy()
    frame.loc[frame.index[:5], "sea_level_pressure"] = -5.0
    assert validate_batch(contract, frame).passed
    frame.loc[frame.index[:20], "sea_level_pressure"] = -5.0
    assert failed_rules(validate_batch(contract, frame)) == {"columns.sea_level_pressure.range"}


def test_infinity_fails_range_when_there_is_one(contract: Contract, reference) -> None:
    frame = reference.copy()
    frame.loc[3, "maximum_temperature"] = np.inf
    result = validate_batch(contract, frame)
    assert failed_rules(result) == {"columns.maximum_temperature.range"}
    assert result.rule("columns.maximum_temperature.range").examples[0]["value"] == "inf"


def test_infinity_fails_finite_without_a_range(contract: Contract, reference) -> None:
    unbounded = with_column(contract, "temperature", min=None, max=None)
    frame = reference.copy()
    frame.loc[[1, 2], "temperature"] = [np.inf, -np.inf]
    result = validate_batch(unbounded, frame)
    assert failed_rules(result) == {"columns.temperature.finite"}
    assert "'temperature'" in result.rule("columns.temperature.finite").message


def test_unseen_category_fails_categories(contract: Contract, reference) -> None:
    seasons = ["winter", "spring", "summer", "autumn"]
    with_season = with_column(contract, "season", dtype="string", categories=seasons)
    frame = reference.assign(season=np.array(seasons)[(reference["date"].dt.month % 12) // 3])
    assert validate_batch(with_season, frame).passed
    frame.loc[[7, 8], "season"] = "monsoon"
    result = validate_batch(with_season, frame)
    assert failed_rules(result) == {"columns.season.categories"}
    failure = result.rule("columns.season.categories")
    assert failure.observed == {"unseen": ["monsoon"]}
    assert "'season'" in failure.message and "'monsoon'" in failure.message


def test_label_outside_its_categories_fails(contract: Contract, reference) -> None:
    frame = reference.copy()
    frame.loc[0, "rain"] = 2
    assert failed_rules(validate_batch(contract, frame)) == {"columns.rain.categories"}


def test_zero_rows_fail_row_count_only(contract: Contract, reference) -> None:
    result = validate_batch(contract, reference.iloc[:0])
    assert failed_rules(result) == {"table.row_count"}
    assert "0 rows" in result.rule("table.row_count").message


def test_duplicated_dates_fail_unique(contract: Contract, reference) -> None:
    frame = reference.copy()
    frame.loc[1, "date"] = frame.loc[0, "date"]
    assert validate_batch(contract, frame).passed  # the demo's dates may repeat (retrains)
    result = validate_batch(with_column(contract, "date", unique=True), frame)
    assert failed_rules(result) == {"columns.date.unique"}
    assert "'date'" in result.rule("columns.date.unique").message


def test_wrongly_typed_label_fails_dtype_not_categories(contract: Contract, reference) -> None:
    frame = reference.assign(rain=reference["rain"].astype(float))
    result = validate_batch(contract, frame)
    assert failed_rules(result) == {"columns.rain.dtype"}
    assert "float64" in result.rule("columns.rain.dtype").message


def test_garbage_frames_never_raise(contract: Contract) -> None:
    frames = [
        pd.DataFrame(),
        pd.DataFrame({"temperature": ["a", None, 3]}),
        pd.DataFrame({"x": [object(), [1, 2], {"a": 1}]}),
        pd.DataFrame([[1, 2]], columns=["temperature", "temperature"]),
        pd.DataFrame({"date": ["not a date"], "rain": [None]}),
        pd.DataFrame({0: [1.0], ("a", "b"): [2], "temperature": [np.nan]}),
    ]
    for frame in frames:
        result = validate_batch(contract, frame)
        assert not result.passed
        json.dumps(result.to_dict(), allow_nan=False)


def test_result_is_json_and_renders(contract: Contract, reference) -> None:
    frame = reference.copy()
    frame.loc[3, "temperature"] = np.nan
    strict = with_column(contract, "temperature", nullable=False, max_null_share=None)
    result = validate_batch(strict, frame)
    data = json.loads(json.dumps(result.to_dict(), allow_nan=False))
    assert data["passed"] is False
    assert data["failed_rules"] == ["columns.temperature.nulls"]
    rule = next(r for r in data["rules"] if r["rule"] == "columns.temperature.nulls")
    assert rule["kind"] == "nulls" and rule["examples"] == [{"row": 3, "value": "nan"}]
    assert result.failed_kinds() == {"nulls": 1}
    markdown = render_markdown(result)
    assert "FAILED" in markdown and "`columns.temperature.nulls`" in markdown
    page = render_html(result)
    assert page.startswith("<!doctype html>") and "columns.temperature.nulls" in page


def test_compiled_suite_is_plain_gx_with_one_expectation_per_rule(contract: Contract) -> None:
    from driftgate.data_contracts.gx_suite import compile_suite

    suite = compile_suite(contract)
    assert [e.meta["rule"] for e in suite.expectations] == [r.id for r in contract.rules()]
    assert suite.name == "rainfall.v1"
