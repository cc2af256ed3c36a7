"""Traffic monitors (issue 16): rejected_share, error_share, latency_p95 — their
configuration, their sample-size-aware decision, and its no-drift calibration."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from benchmarks import rejected_share_bench as bench
from driftgate.core.yamlconfig import ConfigError
from driftgate.monitors.rules import Monitor, check_monitors_against, evaluate_monitor
from driftgate.monitors.traffic import TrafficCounts, share_decision

RULE = {"schedule": "0 0 1 * *", "window": "30d", "action": "notify"}  # level 0.05


def monitor(metric: str, threshold: float, **extra) -> Monitor:
    return Monitor(name="m", metric=metric, threshold=threshold, **RULE, **extra)


def test_config_accepts_traffic_metrics_and_refuses_unknown_rule_kinds():
    assert monitor("rejected_share:range", 0.01).metric == "rejected_share:range"
    with pytest.raises(ValueError, match="unknown rule kind 'rnage'"):
        monitor("rejected_share:rnage", 0.01)
    with pytest.raises(ValueError, match="population"):
        monitor("ks", 0.05, population="some")
    with pytest.raises(ConfigError, match="latency_p95 is per request"):
        check_monitors_against([monitor("latency_p95", 2.0, features=["x"])], ["x"])
    with pytest.raises(ConfigError, match="not fields of the model or contract: y"):
        check_monitors_against([monitor("rejected_share", 0.01, features=["y"])], ["x"])


def test_overall_share_counts_the_overflow_and_is_an_exact_one_sided_test():
    traffic = TrafficCounts(accepted=900, rejected=60, overflow=40)
    result = evaluate_monitor(monitor("rejected_share", 0.05), traffic=traffic)
    assert result.observed == pytest.approx(100 / 1000)
    assert result.p_value == pytest.approx(stats.binom.sf(99, 1000, 0.05))
    assert result.breached and result.level == pytest.approx(0.05)
    assert "40 over the cap" in result.reason


def test_a_share_over_the_threshold_but_not_significant_does_not_breach():
    # 3 of 40 (7.5%) over a 5% threshold: P(Bin(40, .05) >= 3) = 0.32.
    traffic = TrafficCounts(accepted=37, rejected=3)
    result = evaluate_monitor(monitor("rejected_share", 0.05), traffic=traffic)
    assert result.observed > 0.05 and not result.breached and result.status == "ok"
    bare = evaluate_monitor(monitor("rejected_share", 0.05, calibrated=False), traffic=traffic)
    assert bare.breached  # the bare threshold rule fires on noise


def test_too_few_records_is_insufficient_data_and_no_traffic_is_no_data():
    small = evaluate_monitor(
        monitor("rejected_share", 0.5), traffic=TrafficCounts(accepted=1, rejected=1)
    )
    assert small.status == "insufficient_data" and not small.breached  # 0.5^2 > 0.05
    empty = evaluate_monitor(monitor("error_share", 0.01), traffic=TrafficCounts())
    assert empty.status == "no_data"
    files = evaluate_monitor(monitor("error_share", 0.01), traffic=None)
    assert files.status == "error" and "sample store" in files.reason


def test_per_field_and_per_rule_kind_shares():
    traffic = TrafficCounts(
        accepted=900, rejected=100,
        by_kind={"range": 80, "dtype": 20},
        by_field={"pressure": 80, "wind": 20},
        by_field_kind={("pressure", "range"): 80, ("wind", "dtype"): 20},
    )  # fmt: skip
    per_field = evaluate_monitor(
        monitor("rejected_share", 0.03, features=["pressure", "wind"]), traffic=traffic
    )
    assert per_field.breached_features == ["pressure"]  # 8% breaches, 2% does not
    assert per_field.level == pytest.approx(0.025)  # Bonferroni over the two fields
    assert evaluate_monitor(monitor("rejected_share:range", 0.03), traffic=traffic).breached
    assert not evaluate_monitor(monitor("rejected_share:dtype", 0.03), traffic=traffic).breached
    wind_range = evaluate_monitor(
        monitor("rejected_share:range", 0.0, features=["wind"]), traffic=traffic
    )
    assert wind_range.observed == 0.0 and not wind_range.breached


def test_error_share_and_latency_p95():
    errors = evaluate_monitor(
        monitor("error_share", 0.01), traffic=TrafficCounts(requests=1000, errors=30)
    )
    assert errors.breached and errors.observed == pytest.approx(0.03)
    rng = np.random.default_rng(3)
    fast = np.sort(rng.exponential(0.05, 2000))  # p95 ~ 0.15 s
    slow = np.sort(np.concatenate([fast, np.full(300, 3.0)]))  # 13% over 2 s
    ok = evaluate_monitor(monitor("latency_p95", 2.0), traffic=TrafficCounts(latencies=fast))
    assert not ok.breached and ok.observed == pytest.approx(np.quantile(fast, 0.95))
    late = evaluate_monitor(monitor("latency_p95", 2.0), traffic=TrafficCounts(latencies=slow))
    assert late.breached and late.observed == 3.0


def test_share_decision_is_what_the_monitor_decides():
    rule = bench.monitor()
    for n, k in ((100, 5), (100, 12), (1000, 40), (1000, 80), (30, 30)):
        assert bench.fires(rule, n, k) == bench.fires_as_the_monitor(rule, n, k), (n, k)


def test_no_drift_false_alarms_stay_within_the_level_short_calibration():
    """The CI variant of benchmarks/rejected_share_bench.py: at a true rate equal to the
    threshold (the worst case of no drift) the calibrated rule breaches at most at its
    nominal 5% per check at every size; the bare threshold rule breaches ~40-50%."""
    results = bench.run(short=True)
    for row in results["per_check"]:
        # 20,000 draws: 3 standard errors of a 5% rate is 0.0046.
        assert row["calibrated_at_threshold"] <= 0.05 + 0.0046, row
        assert row["calibrated_half"] <= 0.01, row
        assert row["bare_at_threshold"] > 0.3, row
    # Exact bound: P(false breach) <= level at every size (no simulation noise).
    for n in bench.SIZES:
        critical = int(stats.binom.isf(0.05, n, bench.THRESHOLD)) + 1
        assert share_decision(critical, n, 0.02, 0.02, 0.05).breached
        assert stats.binom.sf(critical - 1, n, bench.THRESHOLD) <= 0.05
    assert results["power"][1000] > 0.99
