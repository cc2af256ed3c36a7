"""The drift check's columnar contract verdict equals Great Expectations' (issue 32).

``validate_batch(..., engine="auto")`` judges a numeric window without GX; these tests
run both engines on the same frames and compare the whole results (every rule's
outcome, observed value, share, examples and message), so a difference in any rule
fails here rather than in a window's verdict.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from driftgate.data_contracts import validate_batch
from driftgate.data_contracts.columnar import supported
from driftgate.training.data import RAINFALL_FEATURES
from tests.data_contracts.conftest import with_column

FEATURES = RAINFALL_FEATURES  # the demo contract's numeric columns


def assert_same_verdict(contract, frame, **kwargs) -> None:
    ours = validate_batch(contract, frame, engine="auto", **kwargs)
    theirs = validate_batch(contract, frame, **kwargs)
    assert ours.engine == "columnar"
    assert theirs.engine == "great_expectations"
    mine, gx = ours.to_dict(), theirs.to_dict()
    for result in (mine, gx):
        result.pop("seconds")
        result.pop("engine")
    assert mine == gx


def window(rng, rows, nan_share=0.0, inf_count=0, outliers=0, index=None):
    frame = pd.DataFrame({name: rng.normal(0, 1.2, size=rows) for name in FEATURES})
    if index is not None:
        frame.index = index
    for name in FEATURES:
        values = frame[name].to_numpy()
        if rows:
            values[rng.random(rows) < nan_share] = np.nan
            for _ in range(inf_count):
                values[rng.integers(rows)] = rng.choice([np.inf, -np.inf])
            for _ in range(outliers):
                values[rng.integers(rows)] = rng.choice([-50.0, 50.0])
        frame[name] = values
    return frame


@pytest.mark.parametrize("rows", [0, 1, 30, 500])
@pytest.mark.parametrize(
    ("nan_share", "inf_count", "outliers"), [(0, 0, 0), (0.04, 1, 2), (0.3, 9, 40)]
)
def test_the_demo_contract_on_random_windows(contract, rows, nan_share, inf_count, outliers):
    rng = np.random.default_rng(rows + inf_count)
    assert_same_verdict(contract, window(rng, rows, nan_share, inf_count, outliers))


def test_a_window_of_a_sample_store_with_its_row_count_and_labels(contract):
    # A large window's contract judges an even sample; its row count is the window's.
    rng = np.random.default_rng(3)
    frame = window(rng, 200, 0.06, 2, 3, index=pd.RangeIndex(1000, 1200))
    assert_same_verdict(contract, frame, row_count=8159)
    assert_same_verdict(contract, frame.iloc[::-1], max_examples=2)


def test_null_and_out_of_range_shares_at_their_allowances(contract):
    # mostly is a float comparison in GX: shares exactly at the allowance decide alike.
    frame = window(np.random.default_rng(4), 1000)
    frame.loc[frame.index[:50], "temperature"] = np.nan  # 5.0%, the allowance
    frame.loc[frame.index[:51], "dew_point"] = np.nan  # one more
    frame.loc[frame.index[:1], "sea_level_pressure"] = 5.0  # 0.1%, the allowance
    frame.loc[frame.index[:2], "max_sustained_wind_speed"] = 50.0  # one more
    assert_same_verdict(contract, frame)


def test_missing_extra_int_and_mistyped_columns(contract):
    rng = np.random.default_rng(5)
    frame = window(rng, 40, 0.1, 1, 1).drop(columns=["visibility"])
    frame["temprature"] = 1.0  # an extra column: extra_columns forbid
    frame["dew_point"] = rng.integers(-3, 3, 40)  # ints satisfy a float column
    assert_same_verdict(contract, frame)
    # A float column where the contract says int fails its dtype rule alike.
    as_int = with_column(contract, "visibility", dtype="int", min=None, max=None)
    assert_same_verdict(as_int, window(rng, 20))
    # Bounds on one side only, and a float column with no range (the finite rule).
    one_sided = with_column(contract, "temperature", min=None, max=1.0)
    assert_same_verdict(one_sided, window(rng, 50, 0.1, 3, 5))
    finite = with_column(contract, "dew_point", min=None, max=None)
    assert_same_verdict(finite, window(rng, 50, 0.1, 3, 5))


def test_anything_else_is_left_to_great_expectations(contract):
    rng = np.random.default_rng(6)
    frame = window(rng, 10)
    assert supported(contract, frame)
    with_labels = frame.assign(rain=rng.integers(0, 2, 10))  # a categories rule applies
    assert not supported(contract, with_labels)
    as_text = frame.assign(temperature=frame["temperature"].astype(str))  # object column
    assert not supported(contract, as_text)
    result = validate_batch(contract, as_text, engine="auto")
    assert result.engine == "great_expectations"
    assert result.rule("columns.temperature.dtype").failed


def test_float32_and_int_values_outside_their_range_give_gx_examples(contract):
    # The examples and messages carry the values as GX returns them for these dtypes.
    frame = pd.DataFrame(
        {
            "temperature": np.array([0.5, 9.0, np.nan, 7.0], dtype="float32"),
            "dew_point": np.array([1, 50, -60, 2], dtype="int64"),
        }
    )
    assert_same_verdict(contract, frame)
