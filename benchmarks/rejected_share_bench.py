"""Calibration of the traffic monitors' share test: ``rejected_share`` (and
``error_share``, the same decision) under no drift, and its power.

No drift here means the window's true rejection rate is at most the monitor's
threshold (the tolerated base rate): every breach is a false alarm. Windows are drawn
as binomial counts (``k ~ Binomial(n, rate)``, what a window of ``n`` independent
records is) and judged by the monitor's own code path
(:func:`monitors.traffic.share_decision` at the monitor's level, which is what
:func:`monitors.traffic.evaluate_traffic` decides with; the CI test checks the two agree). Printed:

1. per-check false-alarm rate at a nominal level of 5%, per window size (30 to 100,000
   records), at a true rate equal to the threshold (the worst case of H0) and at half
   of it, next to the bare threshold rule (``calibrated: false``: ``share > threshold``);
2. months (720 hourly checks) with at least one false fire at the monitor's budgeted
   level (5% per 30 days), worst case rate = threshold;
3. power: the share of hourly windows that fire when the rate rises by 5 points.

``python benchmarks/rejected_share_bench.py`` (1,000 months) or ``--short`` (the CI
test's sizes: tests/monitors/test_traffic.py).
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from driftgate.monitors.rules import Monitor
from driftgate.monitors.traffic import TrafficCounts, evaluate_traffic, share_decision

SIZES = (30, 100, 300, 1_000, 3_000, 10_000, 100_000)
THRESHOLD = 0.02


def monitor(calibrated: bool = True, rate: float = 0.05, schedule: str = "0 * * * *") -> Monitor:
    return Monitor(
        name="rejected", metric="rejected_share", threshold=THRESHOLD, schedule=schedule,
        window="1h", action="notify", calibrated=calibrated,
        false_alarms={"rate": rate, "per": "30d"},
    )  # fmt: skip


_LEVELS: dict[tuple, float | None] = {}


def fires(rule: Monitor, n: int, k: int) -> bool:
    """The monitor's decision on ``k`` refused of ``n`` records: the share test of
    :func:`monitors.traffic.evaluate_traffic` at the rule's level (computed once per
    rule: the level needs the schedule's checks per horizon, a cron walk)."""
    key = (rule.schedule, rule.calibrated, rule.false_alarms.rate)
    if key not in _LEVELS:
        _LEVELS[key] = rule.level(1)
    return share_decision(k, n, rule.threshold, rule.threshold, _LEVELS[key]).breached


def fires_as_the_monitor(rule: Monitor, n: int, k: int) -> bool:
    """The same decision through the drift check's path (the CI test compares them)."""
    traffic = TrafficCounts(accepted=n - k, rejected=k)
    base = {"monitor": rule.name, "metric": rule.metric, "action": rule.action,
            "threshold": rule.threshold}  # fmt: skip
    return evaluate_traffic(rule, traffic, base).breached


def per_check_rate(rule: Monitor, n: int, rate: float, draws: int, rng) -> float:
    """Share of no-drift windows of ``n`` records that breach (counts deduplicated:
    each distinct ``k`` is judged once)."""
    counts = rng.binomial(n, rate, size=draws)
    values, times = np.unique(counts, return_counts=True)
    breached = sum(t for k, t in zip(values, times, strict=True) if fires(rule, n, int(k)))
    return breached / draws


def months_with_false_fire(rule: Monitor, n: int, rate: float, months: int, rng) -> float:
    checks = rule.checks_per_horizon
    counts = rng.binomial(n, rate, size=(months, checks))
    decided = {int(k): fires(rule, n, int(k)) for k in np.unique(counts)}
    hit = np.vectorize(decided.__getitem__)(counts)
    return float(hit.any(axis=1).mean())


def run(short: bool = False, seed: int = 16) -> dict:
    rng = np.random.default_rng(seed)
    draws = 20_000 if short else 200_000
    months = 100 if short else 1_000
    nominal = Monitor.model_validate(
        {**monitor().model_dump(), "schedule": "0 0 1 * *",
         "false_alarms": {"rate": 0.05, "per": "30d"}}
    )  # fmt: skip
    # (monthly: one check per 30-day horizon, so the level per check is the nominal 5%)
    bare = monitor(calibrated=False)
    results = {"per_check": [], "months": {}, "power": {}}
    for n in SIZES:
        row = {"n": n}
        for label, rate in (("at_threshold", THRESHOLD), ("half", THRESHOLD / 2)):
            row[f"calibrated_{label}"] = per_check_rate(nominal, n, rate, draws, rng)
            row[f"bare_{label}"] = per_check_rate(bare, n, rate, draws, rng)
        results["per_check"].append(row)
    hourly = monitor()
    for n in (100, 1_000, 10_000):
        results["months"][n] = months_with_false_fire(hourly, n, THRESHOLD, months, rng)
        results["power"][n] = per_check_rate(hourly, n, THRESHOLD + 0.05, draws, rng)
    results["level"] = hourly.level(1)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--short", action="store_true")
    args = parser.parse_args()
    began = time.perf_counter()
    results = run(short=args.short)
    print(f"rejected_share, threshold {THRESHOLD}: per-check false alarms at nominal 5%")
    print(f"{'records':>9}{'cal @thr':>10}{'bare @thr':>11}{'cal @thr/2':>12}{'bare @thr/2':>13}")
    for row in results["per_check"]:
        print(
            f"{row['n']:>9}{row['calibrated_at_threshold']:>10.4f}{row['bare_at_threshold']:>11.4f}"
            f"{row['calibrated_half']:>12.4f}{row['bare_half']:>13.4f}"
        )
    print(f"\nhourly monitor, budget 5% per 30d (level {results['level']:.2e} per check)")
    for n, share in results["months"].items():
        print(
            f"{n:>7} records/hour: months with a false fire {share:.3f}; "
            f"power at +5 points: {results['power'][n]:.3f} of windows fire"
        )
    print(f"\n{time.perf_counter() - began:.1f} s")


if __name__ == "__main__":
    main()
