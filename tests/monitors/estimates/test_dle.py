"""Direct loss estimation of a regression's RMSE and MAE (issue 31): fitted with the
outputs profile from the reference's features, it tracks the realized error on fresh
windows, breaches when the window moves to where the model errs more, not on a
no-drift window, and survives the profile's save and load (JSON, no pickle)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from driftgate.monitors.actions.registry import ActionRequest
from driftgate.monitors.kinds.outputs import evaluate_output_monitor
from driftgate.monitors.outputs import OutputsProfile, output_frame
from driftgate.monitors.rules import Monitor


def regression_data(rng, rows: int, noisy_share: float = 0.2):
    """A model that predicts the mean exactly, whose error is 4x larger for the
    'noisy' segment and grows with |x|: its RMSE depends on where the records lie."""
    x = rng.uniform(-2, 2, rows)
    segment = np.where(rng.random(rows) < noisy_share, "noisy", "calm")
    scale = (1 + np.abs(x)) * np.where(segment == "noisy", 4.0, 1.0)
    prediction = 3 * x
    target = prediction + rng.normal(size=rows) * scale
    return pd.DataFrame({"x": x, "segment": segment}), prediction, target


def window(features: pd.DataFrame, prediction: np.ndarray) -> pd.DataFrame:
    """A window's samples as the sample store gives them: features and outputs."""
    return pd.concat(
        [features.reset_index(drop=True), output_frame("regression", prediction, 0.5)], axis=1
    )


def monitor(metric: str, threshold: float) -> Monitor:
    return Monitor(
        name="dle", metric=metric, threshold=threshold, schedule="0 * * * *", action="notify"
    )


@pytest.fixture(scope="module")
def profile():
    features, prediction, target = regression_data(np.random.default_rng(11), 4000)
    return OutputsProfile.fit("regression", prediction, target, features=features)


def realized(prediction, target, metric):
    error = target - prediction
    return float(np.sqrt(np.mean(error**2))) if metric == "rmse" else float(np.mean(np.abs(error)))


@pytest.mark.parametrize("metric", ["rmse", "mae"])
def test_the_estimate_tracks_the_realized_error_as_the_mix_shifts(profile, metric):
    rng = np.random.default_rng(12)
    assert profile.realized[metric] == pytest.approx(profile.estimated[metric], rel=0.05)
    for share in (0.05, 0.2, 0.6):
        features, prediction, target = regression_data(rng, 3000, noisy_share=share)
        estimate = profile.estimate(window(features, prediction), metric)
        truth = realized(prediction, target, metric)
        # Within 4 sampling errors of the realized value, and 10% of it.
        assert abs(estimate.value - truth) <= max(4 * estimate.standard_error, 0.1 * truth), (
            share,
            estimate,
            truth,
        )
        assert estimate.reliability["reliable"]


@pytest.mark.parametrize("metric", ["rmse", "mae"])
def test_the_monitor_breaches_on_a_rise_and_not_on_a_calm_window(profile, metric):
    rng = np.random.default_rng(13)
    rule = monitor(f"performance_estimate:{metric}", threshold=0.3)
    features, prediction, _ = regression_data(rng, 500, noisy_share=0.6)
    worse = evaluate_output_monitor(rule, profile, window(features, prediction))
    assert worse.status == "ok" and worse.breached, worse
    assert worse.details["drop"] >= 0.3 and worse.details["higher_is_better"] is False
    assert worse.details["floor"] is None  # an error has no worst value
    request = ActionRequest(
        model_name="m",
        model_version="1",
        start=pd.Timestamp("2040-01-01", tz="UTC"),
        end=pd.Timestamp("2040-01-02", tz="UTC"),
        result=worse,
    )
    assert f"a rise of {worse.details['drop']:.4g} >= 0.3 from the reference" in request.what
    features, prediction, _ = regression_data(rng, 500)
    calm = evaluate_output_monitor(rule, profile, window(features, prediction))
    assert calm.status == "ok" and not calm.breached, calm
    # A window of the calm segment only is *better*: a negative drop, never a breach.
    features, prediction, _ = regression_data(rng, 500, noisy_share=0.0)
    better = evaluate_output_monitor(rule, profile, window(features, prediction))
    assert better.status == "ok" and not better.breached and better.details["drop"] < 0


def test_no_drift_windows_rarely_breach_at_the_monitors_level(profile):
    rng = np.random.default_rng(14)
    # One check a day with a 20% budget: each window may breach with chance 0.2.
    rule = Monitor(
        name="dle",
        metric="performance_estimate:rmse",
        threshold=0.0,
        schedule="0 0 * * *",
        action="notify",
        false_alarms={"rate": 0.2, "per": "1d"},
    )
    fires = 0
    for _ in range(60):
        features, prediction, _ = regression_data(rng, 200)
        fires += evaluate_output_monitor(rule, profile, window(features, prediction)).breached
    assert fires <= 20  # 20% of 60 is 12; 20 is beyond the binomial's 99.5% quantile


def test_the_profile_round_trips_without_pickle(profile, tmp_path):
    folder = profile.save(tmp_path / "outputs")
    assert not [p for p in folder.rglob("*") if p.suffix in (".pkl", ".pickle", ".joblib")]
    again = OutputsProfile.load(folder)
    features, prediction, _ = regression_data(np.random.default_rng(15), 300)
    frame = window(features, prediction)
    for metric in ("rmse", "mae"):
        assert again.estimate(frame, metric).to_dict() == profile.estimate(frame, metric).to_dict()


def test_without_features_the_regression_says_what_it_needs():
    features, prediction, target = regression_data(np.random.default_rng(16), 500)
    bare = OutputsProfile.fit("regression", prediction, target)
    assert bare.estimated == {}
    result = evaluate_output_monitor(
        monitor("performance_estimate:rmse", 0.3), bare, window(features, prediction)
    )
    assert result.status == "error" and "without the features it needs" in result.reason


def test_a_window_without_the_features_is_insufficient_not_a_crash(profile):
    features, prediction, _ = regression_data(np.random.default_rng(17), 300)
    samples = window(features, prediction).drop(columns="segment")
    result = evaluate_output_monitor(monitor("performance_estimate:mae", 0.3), profile, samples)
    assert result.status == "insufficient_data" and "'segment'" in result.reason


def test_a_reference_target_without_a_finite_loss_leaves_the_metric_out_not_a_crash():
    features, prediction, target = regression_data(np.random.default_rng(18), 300)
    target[5] = np.nan
    profile = OutputsProfile.fit("regression", prediction, target, features=features)
    assert profile.estimated == {} and profile.state == {}
