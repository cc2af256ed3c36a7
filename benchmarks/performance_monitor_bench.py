"""Realized-performance monitors: false breaches and power of ``performance:<metric>``.

A seeded binary population stands in for a champion: labels y ~ Bernoulli(0.3) and a
score whose log-odds are ``separation * (2y - 1) + N(0, 1)``, so its ROC AUC is known
from a large test set (the gate-time ``test_roc_auc``, the monitor's baseline, with
its own noise: the test set has ``test_rows`` rows). Each simulated window draws
``n`` labelled records:

* **no drop**: from the same population; every breach is false;
* **drop**: with a share of the labels flipped (the world changed under the model), a
  real drop of the AUC.

The decision under test is the monitor's (:func:`monitors.performance.judge_drop`:
drop > threshold AND one-sided p <= level, bootstrap standard error). Its peer in the
same run is the bare rule "drop > threshold", what a threshold on a dashboard does
(``calibrated: false``).

Figures printed, per window size n (labelled records): false-breach rate of the
calibrated rule and of the bare rule at threshold 0.02, level 0.01; power of both at
a true drop (10% of labels flipped); mean bootstrap standard error vs the spread of
the realized AUC over windows (is the error honest?); seconds per decision.

``python benchmarks/performance_monitor_bench.py`` (400 windows per cell) or
``--short`` (the CI variant's sizes).
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from driftgate.monitors.performance import judge_drop, realized_performance

THRESHOLD = 0.02
LEVEL = 0.01
FLIP = 0.10


def population(rows: int, rng: np.random.Generator, separation: float = 1.0):
    y = (rng.random(rows) < 0.3).astype(int)
    logit = separation * (2 * y - 1) + rng.normal(size=rows)
    return y, 1 / (1 + np.exp(-logit))


def window(n: int, rng: np.random.Generator, flip: float = 0.0):
    y, p = population(n, rng)
    if flip:
        chosen = rng.random(n) < flip
        y = np.where(chosen, 1 - y, y)
    return y, p


def cell(n: int, windows: int, flip: float, seed: int, test_rows: int = 3_000,
         resamples: int = 200) -> dict:  # fmt: skip
    """Breach rates of both rules over ``windows`` windows of ``n`` labels."""
    rng = np.random.default_rng(seed)
    ty, tp = population(test_rows, rng)
    baseline = realized_performance("binary", "roc_auc", ty, tp, resamples=2).value
    calibrated = bare = 0
    values, errors = [], []
    started = time.perf_counter()
    for _ in range(windows):
        y, p = window(n, rng, flip)
        realized = realized_performance("binary", "roc_auc", y, p, resamples=resamples,
                                        seed=int(rng.integers(2**31)))  # fmt: skip
        values.append(realized.value)
        errors.append(realized.se)
        calibrated += judge_drop(realized, baseline, THRESHOLD, LEVEL).breached
        bare += judge_drop(realized, baseline, THRESHOLD, None).breached
    seconds = (time.perf_counter() - started) / windows
    return {
        "n": n,
        "flip": flip,
        "calibrated": calibrated / windows,
        "bare": bare / windows,
        "mean_se": float(np.mean(errors)),
        "spread": float(np.std(values, ddof=1)),
        "seconds": seconds,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--short", action="store_true")
    args = parser.parse_args(argv)
    windows = 60 if args.short else 400
    sizes = (100, 1_000) if args.short else (50, 100, 300, 1_000, 3_000)
    print(f"threshold {THRESHOLD}, level {LEVEL}, {windows} windows per cell")
    print(f"{'n':>6} {'flip':>5} {'calibrated':>10} {'bare':>6} {'mean se':>8} "
          f"{'spread':>8} {'s/decision':>10}")  # fmt: skip
    for n in sizes:
        for flip in (0.0, FLIP):
            row = cell(n, windows, flip, seed=n)
            print(
                f"{row['n']:>6} {row['flip']:>5.2f} {row['calibrated']:>10.3f} "
                f"{row['bare']:>6.3f} {row['mean_se']:>8.4f} {row['spread']:>8.4f} "
                f"{row['seconds']:>10.4f}"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
