"""Is one model better than another on the same rows, beyond their sampling error?

The promotion gate compares a candidate with the champion (``promotion.recent``) and with
a constant answer (the ``trivial_baseline`` check) on a recent labelled slice, which may
be a few dozen rows. A raw difference on 30 rows is mostly luck, so each comparison is a
one-sided **paired sign-flip (randomization) test** on the per-row losses: under "the
candidate is no better", each row's loss difference is as likely positive as negative,
so flipping the signs at random gives the differences' distribution without assuming
normality (valid at any size; for 0/1 accuracy it is the exact McNemar test). The
candidate counts as better only when the p-value is at most ``1 - confidence``.

``benchmarks/recent_slice_bench.py`` measures what that promises: how often a candidate
no better than the champion is promoted on 30-1000 row slices, and how often a truly
better one is.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

# Random sign patterns drawn; the p-value's resolution is about 1 / FLIPS.
FLIPS = 4000
# Drawn this many at a time, so a 100k-row slice needs no 4000 x 100k matrix.
FLIP_CHUNK = 250
# Losses per row, by metric: what "lower is better" means for one row.
ROW_METRICS = {
    "binary": ("accuracy", "log_loss"),
    "multiclass": ("accuracy", "log_loss"),
    "regression": ("rmse", "mae"),
}
_EPS = 1e-15


@dataclass(frozen=True)
class PairedComparison:
    """The candidate's mean per-row improvement over the other model and its p-value."""

    improvement: float  # mean(other loss - candidate loss): positive, the candidate is better
    p_value: float
    rows: int
    confidence: float

    @property
    def better(self) -> bool:
        return self.rows > 0 and self.p_value <= 1.0 - self.confidence


def row_losses(
    task: str, metric: str, targets: np.ndarray, outputs: np.ndarray, decision_threshold: float
) -> np.ndarray:
    """One loss per row (lower is better) whose mean is the metric (its square for rmse):
    ``accuracy``: 1 for a wrong answer; ``log_loss``: -log P(true class); ``rmse``: the
    squared error; ``mae``: the absolute error. ``outputs``: the task's output shape
    (binary P(class 1), multiclass probabilities, regression values)."""
    targets = np.asarray(targets)
    outputs = np.asarray(outputs, dtype=np.float64)
    if metric not in ROW_METRICS[task]:
        raise ValueError(f"{metric} is not a per-row metric of a {task} model")
    if task == "regression":
        error = outputs.ravel() - targets.astype(np.float64)
        return error**2 if metric == "rmse" else np.abs(error)
    if task == "binary":
        p1 = outputs.ravel()
        if metric == "accuracy":
            return ((p1 >= decision_threshold).astype(int) != targets).astype(np.float64)
        p_true = np.where(targets == 1, p1, 1.0 - p1)
    else:
        classes = targets.astype(int)
        if metric == "accuracy":
            return (outputs.argmax(axis=1) != classes).astype(np.float64)
        p_true = outputs[np.arange(len(classes)), classes]
    return -np.log(np.clip(p_true, _EPS, 1.0))


def constant_outputs(task: str, targets: np.ndarray, n_classes: int, rows: int) -> np.ndarray:
    """The best constant answer for ``targets``, repeated ``rows`` times: the class prior
    (binary P(class 1), multiclass class shares: its argmax is the majority class) or
    the mean (regression)."""
    targets = np.asarray(targets)
    if task == "regression":
        return np.full(rows, float(np.mean(targets)))
    if task == "binary":
        return np.full(rows, float(np.mean(targets == 1)))
    shares = np.bincount(targets.astype(int), minlength=n_classes) / max(len(targets), 1)
    return np.tile(shares, (rows, 1))


def compare_paired(
    candidate_loss: np.ndarray,
    other_loss: np.ndarray,
    confidence: float,
    *,
    flips: int = FLIPS,
    seed: int = 0,
) -> PairedComparison:
    """One-sided paired sign-flip test that the candidate's mean loss is lower.

    The p-value counts the observed statistic among the flips ((1 + hits) / (1 + flips)),
    so it is never 0 and the test never rejects more often than its level. Seeded: the
    same rows give the same verdict in every gate run.
    """
    difference = np.asarray(other_loss, np.float64) - np.asarray(candidate_loss, np.float64)
    rows = len(difference)
    if rows == 0:
        return PairedComparison(float("nan"), 1.0, 0, confidence)
    observed = float(difference.mean())
    if not np.any(difference):  # identical on every row: no evidence either way
        return PairedComparison(0.0, 1.0, rows, confidence)
    rng = np.random.default_rng(seed)
    hits, drawn = 0, 0
    # Rounding: a flip equal to the observed mean counts as reaching it.
    bar = observed - 1e-12 * max(1.0, abs(observed))
    while drawn < flips:
        size = min(FLIP_CHUNK, flips - drawn)
        signs = rng.integers(0, 2, size=(size, rows), dtype=np.int8) * 2 - 1
        hits += int(np.count_nonzero((signs @ difference) / rows >= bar))
        drawn += size
    return PairedComparison(observed, (1 + hits) / (1 + flips), rows, confidence)
