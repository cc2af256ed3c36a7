"""Inferring a contract from data: it passes on its own data, with margins."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from driftgate.data_contracts import Contract, infer_contract, validate_batch

from .conftest import with_documented_edits


@pytest.fixture(scope="module")
def inferred(reference) -> Contract:
    return infer_contract(reference, name="rainfall", optional=["rain", "date"])


def test_inferred_contract_passes_on_its_data_and_round_trips(inferred, reference) -> None:
    assert validate_batch(inferred, reference).passed
    assert Contract.from_yaml(inferred.to_yaml()) == inferred


def test_inferred_contract_matches_the_committed_one(inferred, contract: Contract) -> None:
    assert with_documented_edits(inferred).columns == contract.columns


def test_inferred_ranges_have_margins_beyond_the_robust_quantiles(inferred, reference) -> None:
    spec = inferred.columns["temperature"]
    low, high = np.quantile(reference["temperature"], [0.001, 0.999])
    assert spec.min < low - 0.2 * (high - low)
    assert spec.max > high + 0.2 * (high - low)


def test_a_corrupt_extreme_does_not_widen_the_range(inferred) -> None:
    # The reference period has a sea-level pressure of 94 (standardised units).
    spec = inferred.columns["sea_level_pressure"]
    assert spec.max < 2
    assert 0 < spec.max_out_of_range_share <= 0.001


def test_dtypes_nulls_categories_and_uniqueness_are_inferred() -> None:
    frame = pd.DataFrame(
        {
            "id": [f"r{i}" for i in range(40)],
            "colour": ["red", "blue"] * 20,
            "count": np.arange(40),
            "flag": [True, False] * 20,
            "score": [np.nan] * 4 + list(np.linspace(0, 1, 36)),
            "day": pd.date_range("2020-01-01", periods=40, freq="D"),
        }
    )
    contract = infer_contract(frame, name="toy", optional=["flag"])
    columns = contract.columns
    assert columns["id"].dtype == "string" and columns["id"].unique
    # Distinct days are this file's property: production records of one request share
    # their time, and a retrain trains on them (docs/monitors.md).
    assert columns["day"].dtype == "datetime" and not columns["day"].unique
    assert columns["colour"].categories == ["blue", "red"]
    assert columns["count"].dtype == "int" and columns["count"].min <= 0
    assert columns["flag"].dtype == "bool" and not columns["flag"].required
    assert columns["score"].max_null_share == pytest.approx(0.16)
    assert validate_batch(contract, frame).passed


def test_unknown_optional_column_is_refused(reference) -> None:
    with pytest.raises(ValueError, match="label"):
        infer_contract(reference, name="x", optional=["label"])
