"""Every estimate checks its own assumption (issue 31): a window whose records lie
outside the reference's support is reported unreliable, with the reason and the
columns, as ``insufficient_data``: neither a confident number nor a breach."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from driftgate.monitors.estimates.reliability import MAX_OUTSIDE_SHARE, Support
from driftgate.monitors.kinds.outputs import evaluate_output_monitor
from driftgate.monitors.outputs import OutputsProfile, output_frame
from driftgate.monitors.rules import Monitor
from tests.monitors.estimates.test_dle import regression_data, window


def monitor(metric: str, threshold: float = 0.05) -> Monitor:
    return Monitor(
        name="m", metric=metric, threshold=threshold, schedule="0 * * * *", action="notify"
    )


def binary_data(rng, rows: int, income_shift: float = 0.0):
    """A classifier whose confidence follows income; calibrated where it was trained."""
    income = rng.normal(50, 10, rows) + income_shift
    region = rng.choice(["north", "south"], rows)
    p = 1 / (1 + np.exp(-(income - 50) / 5))
    return pd.DataFrame({"income": income, "region": region}), p, (rng.random(rows) < p).astype(int)


@pytest.fixture(scope="module")
def binary():
    features, p, y = binary_data(np.random.default_rng(21), 3000)
    return OutputsProfile.fit("binary", p, y, features=features)


@pytest.fixture(scope="module")
def regression():
    features, prediction, target = regression_data(np.random.default_rng(22), 3000)
    return OutputsProfile.fit("regression", prediction, target, features=features)


def test_a_shift_outside_the_support_makes_a_regression_estimate_unreliable(regression):
    features, _, _ = regression_data(np.random.default_rng(23), 400)
    features["x"] += 3.0  # most records beyond the reference's largest x (2)
    result = evaluate_output_monitor(
        monitor("performance_estimate:rmse", 0.3), regression, window(features, 3 * features["x"])
    )
    assert result.status == "insufficient_data" and not result.breached, result
    assert result.reason.startswith("estimate unreliable: ")
    assert "outside the reference's support" in result.reason and "x " in result.reason
    assert result.details["reliability"]["outside_share"] > 0.5
    assert result.observed is None  # no confident number


def test_a_shift_outside_the_support_makes_a_classifier_estimate_unreliable(binary):
    rng = np.random.default_rng(24)
    features, p, _ = binary_data(rng, 500)
    features["region"] = "west"  # a level the reference never held
    samples = pd.concat([features, output_frame("binary", p, 0.5)], axis=1)
    for metric in ("accuracy", "roc_auc"):
        result = evaluate_output_monitor(monitor(f"performance_estimate:{metric}"), binary, samples)
        assert result.status == "insufficient_data", result
        assert "region 100%" in result.reason


def test_no_drift_windows_stay_reliable_and_are_judged(binary, regression):
    rng = np.random.default_rng(25)
    for _ in range(20):
        features, p, _ = binary_data(rng, 200)
        samples = pd.concat([features, output_frame("binary", p, 0.5)], axis=1)
        result = evaluate_output_monitor(monitor("performance_estimate:accuracy"), binary, samples)
        assert result.status == "ok", result
        assert result.details["reliability"]["outside_share"] <= MAX_OUTSIDE_SHARE
        assert binary.support.limit < MAX_OUTSIDE_SHARE + 0.01  # 3 numbers, 3,000 rows
        features, prediction, _ = regression_data(rng, 200)
        result = evaluate_output_monitor(
            monitor("performance_estimate:mae", 0.3), regression, window(features, prediction)
        )
        assert result.status == "ok", result


def test_a_shift_inside_the_support_is_still_estimated(binary):
    """The check is about extrapolation, not about any drift: a move within the range
    the reference showed keeps a number (the estimate's own job)."""
    features, p, _ = binary_data(np.random.default_rng(26), 500, income_shift=-5.0)
    samples = pd.concat([features, output_frame("binary", p, 0.5)], axis=1)
    result = evaluate_output_monitor(monitor("performance_estimate:accuracy"), binary, samples)
    assert result.status == "ok" and result.observed is not None


def test_the_limit_allows_for_a_small_references_own_extremes():
    """150 reference rows, 10 numbers: 12.5% of no-drift records are outside some range
    by chance; the limit adds the 10% of a shift to that, so a no-drift window passes."""
    rng = np.random.default_rng(28)
    support = Support.fit(pd.DataFrame(rng.normal(size=(150, 10))).rename(columns=str))
    assert support.chance_share == pytest.approx(1 - (1 - 2 / 151) ** 10)
    calm = pd.DataFrame(rng.normal(size=(2000, 10))).rename(columns=str)
    check = support.check(calm)
    assert check["outside_share"] > MAX_OUTSIDE_SHARE and check["reliable"], check
    assert not support.check(calm + 1.5)["reliable"]


def test_the_support_round_trips_and_a_profile_without_it_is_unchecked(binary, tmp_path):
    again = OutputsProfile.load(binary.save(tmp_path / "outputs"))
    assert again.support == binary.support
    assert Support.from_json(binary.support.to_json()) == binary.support
    features, p, _ = binary_data(np.random.default_rng(27), 100)
    older = OutputsProfile.load(binary.save(tmp_path / "older"))
    older.support = None  # a champion profiled before the check
    frame = pd.concat([features.assign(income=500.0), output_frame("binary", p, 0.5)], axis=1)
    assert older.estimate(frame, "accuracy").reliability == {"reliable": True, "checked": 0}
    assert not again.estimate(frame, "accuracy").reliability["reliable"]
