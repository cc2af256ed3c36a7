"""How often the recent-slice rules promote a candidate, by slice size.

The gate's two recent-slice rules are one-sided paired sign-flip tests
(:mod:`driftgate.gates.paired`): ``promotion.recent`` (the candidate better than the
champion) and the ``trivial_baseline`` check (better than the majority class). This
simulation draws binary labels with a 65% majority class (the demo's "no rain" share)
and two models whose answers agree on most rows, as a retrained candidate and its
champion do, and counts how often each rule says "better":

- false promotion rate: the candidate exactly as good as the champion (and, for the
  baseline rule, a model exactly as accurate as the majority class); the rule promises
  at most 1 - confidence (5%);
- power: the candidate truly better by ``--effect`` accuracy (0.05, 0.10, 0.20).

Run: .venv/bin/python benchmarks/recent_slice_bench.py [--trials 2000] [--flips 1000]
"""

from __future__ import annotations

import argparse

import numpy as np

from driftgate.gates.paired import compare_paired

MAJORITY = 0.65
CHAMPION_ACCURACY = 0.65
SIZES = (30, 100, 300, 1000)
EFFECTS = (0.05, 0.10, 0.20)
DISAGREE = 0.3  # share of rows where candidate and champion answer differently


def paired_errors(rng, rows: int, base: float, better: float) -> tuple[np.ndarray, np.ndarray]:
    """Per-row 0/1 errors of a champion of accuracy ``base`` and a candidate of accuracy
    ``base + better`` that disagree on ``DISAGREE`` of the rows (both are right, or both
    wrong, on the rest, as a retrained model and its champion are)."""
    fixes = (DISAGREE + better) / 2  # candidate right, champion wrong
    breaks = (DISAGREE - better) / 2  # candidate wrong, champion right
    both_right = base - breaks
    draw = rng.random(rows)
    champion_right = (draw < both_right) | ((draw >= both_right) & (draw < both_right + breaks))
    candidate_right = (draw < both_right) | (
        (draw >= both_right + breaks) & (draw < both_right + breaks + fixes)
    )
    return (~candidate_right).astype(float), (~champion_right).astype(float)


def rate(rng, rows: int, better: float, trials: int, flips: int) -> float:
    promoted = 0
    for trial in range(trials):
        candidate, champion = paired_errors(rng, rows, CHAMPION_ACCURACY, better)
        promoted += compare_paired(candidate, champion, 0.95, flips=flips, seed=trial).better
    return promoted / trials


def baseline_rate(rng, rows: int, accuracy: float, trials: int, flips: int) -> float:
    """A model of ``accuracy`` against always answering the slice's majority class."""
    promoted = 0
    for trial in range(trials):
        labels = rng.random(rows) < 1 - MAJORITY  # True: the minority class
        majority_wrong = labels if labels.mean() <= 0.5 else ~labels
        model_right = rng.random(rows) < accuracy
        promoted += compare_paired(
            (~model_right).astype(float),
            majority_wrong.astype(float),
            0.95,
            flips=flips,
            seed=trial,
        ).better
    return promoted / trials


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=2000)
    parser.add_argument("--flips", type=int, default=1000)
    args = parser.parse_args()
    rng = np.random.default_rng(29)
    print(
        f"promotion.recent, champion accuracy {CHAMPION_ACCURACY}, confidence 0.95, "
        f"{args.trials} trials per cell"
    )
    print(
        f"{'rows':>6} {'false promotion':>16} "
        + " ".join(f"{'power +' + str(e):>12}" for e in EFFECTS)
    )
    for rows in SIZES:
        false = rate(rng, rows, 0.0, args.trials, args.flips)
        power = [rate(rng, rows, e, args.trials, args.flips) for e in EFFECTS]
        print(f"{rows:>6} {false:>16.3f} " + " ".join(f"{p:>12.3f}" for p in power))
    print(f"\ntrivial_baseline, majority class {MAJORITY:.0%} (slice's own majority), 0.95")
    print(f"{'rows':>6} {'model = majority':>16} {'model 0.75':>12} {'model 0.78':>12}")
    for rows in SIZES:
        cells = [
            baseline_rate(rng, rows, a, args.trials, args.flips) for a in (MAJORITY, 0.75, 0.78)
        ]
        print(f"{rows:>6} " + f"{cells[0]:>16.3f} " + " ".join(f"{c:>12.3f}" for c in cells[1:]))


if __name__ == "__main__":
    main()
