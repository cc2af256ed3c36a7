"""``roc_auc`` estimated from calibrated confidences: ROC AUC with soft labels.

Binary: each record is positive with its calibrated P(class 1). A window's estimate is
never below 0.5 (the calibrator is monotone).

Multiclass: one-vs-rest, macro (as NannyML's CBPE), on what the sample store keeps of
each record: its predicted class and the top class's probability ``p``. Class ``k``'s
score ranks its predicted records first, by ``p``, then the others by ``1 - p`` (the
order the full probabilities give when the rest of the mass is spread evenly: a
predicted record's ``p >= 1/K``, another's share ``(1 - p)/(K - 1) <= 1/K``); a
record is of class ``k`` with chance ``calibrated(p)`` when predicted ``k``, else
``(1 - calibrated(p))`` times the reference's share of ``k`` among the misses of the
predicted class. Realized on the same scores.

Both: the no-drift spread and small-window bias are bootstrapped on the reference; the
realized error is Hanley-McNeil's (multiclass: per class at the reference's class
shares, averaged over the classes as independent).
"""

from __future__ import annotations

import math

import numpy as np

from driftgate.monitors.estimates.calibration import (
    CLASS_COLUMN,
    VALUE_COLUMN,
    expected_roc_auc,
    hanley_mcneil_se,
)
from driftgate.monitors.estimates.registry import SPREAD_ROWS, EstimatedMetric, register

SPREAD_RESAMPLES = 200


class BinaryRocAuc(EstimatedMetric):
    metric = "roc_auc"
    task = "binary"

    def realized(self, frame, target) -> float:
        return expected_roc_auc(frame[VALUE_COLUMN].to_numpy(), np.asarray(target).astype(int))

    def value(self, profile, frame, calibrator=None) -> float:
        scores = frame[VALUE_COLUMN].to_numpy(dtype=np.float64)
        return expected_roc_auc(scores, (calibrator or profile.calibrator)(scores))

    def realized_error(self, profile, rows: int) -> float:
        if rows < 1:
            return float("inf")
        positives = rows * (profile.positive_share or 0.0)
        return hanley_mcneil_se(profile.realized[self.metric], positives, rows - positives)

    def spread(self, profile, frame, calibrated) -> dict:
        scores = frame[VALUE_COLUMN].to_numpy(dtype=np.float64)
        rng = np.random.default_rng(0)
        units, biases = [], []
        for rows in SPREAD_ROWS:
            draws = rng.integers(0, scores.size, size=(SPREAD_RESAMPLES, rows))
            values = np.array([expected_roc_auc(scores[d], calibrated[d]) for d in draws])
            units.append(float(np.nanstd(values) * math.sqrt(rows)))
            biases.append(float(np.nanmean(values)) - profile.estimated[self.metric])
        return {"rows": list(SPREAD_ROWS), "unit_std": units, "bias": biases}

    def floor(self, profile) -> float:
        return 0.5


def one_vs_rest_scores(frame, classes: int) -> np.ndarray:
    """Per record and class ``k``: a score that ranks as the full probability of ``k``
    would, from the stored top probability and predicted class (module docstring)."""
    top = frame[VALUE_COLUMN].to_numpy(dtype=np.float64)
    predicted = frame[CLASS_COLUMN].to_numpy(dtype=np.int64)
    mine = predicted[:, None] == np.arange(classes)[None, :]
    return np.where(mine, 1.0 + top[:, None], 1.0 - top[:, None])


def macro_auc(scores: np.ndarray, positive: np.ndarray) -> float:
    """The mean over classes of ROC AUC with soft labels (a class with no expected
    positives or negatives in the window is left out, as NannyML leaves it)."""
    per_class = [expected_roc_auc(scores[:, k], positive[:, k]) for k in range(scores.shape[1])]
    defined = [a for a in per_class if math.isfinite(a)]
    return float(np.mean(defined)) if defined else math.nan


class MulticlassRocAuc(EstimatedMetric):
    metric = "roc_auc"
    task = "multiclass"

    def classes(self, profile) -> int:
        return int(profile.state[self.metric]["classes"])

    def fit(self, profile, frame, target, features) -> dict:
        target = np.asarray(target, dtype=np.int64)
        predicted = frame[CLASS_COLUMN].to_numpy(dtype=np.int64)
        classes = max(len(profile.classes), int(target.max()) + 1, int(predicted.max()) + 1)
        # P(true k | predicted j, a miss): half a record of each class as a prior, so a
        # class never missed on the reference still gets a share.
        misses = np.full((classes, classes), 0.5)
        np.fill_diagonal(misses, 0.0)
        wrong = predicted != target
        np.add.at(misses, (predicted[wrong], target[wrong]), 1.0)
        misses /= misses.sum(axis=1, keepdims=True)
        return {
            "classes": classes,
            "miss_share": misses.tolist(),
            "class_share": (np.bincount(target, minlength=classes) / target.size).tolist(),
        }

    def soft_labels(self, profile, frame, calibrated: np.ndarray) -> np.ndarray:
        classes = self.classes(profile)
        predicted = frame[CLASS_COLUMN].to_numpy(dtype=np.int64)
        misses = np.asarray(profile.state[self.metric]["miss_share"])
        mine = predicted[:, None] == np.arange(classes)[None, :]
        return np.where(mine, calibrated[:, None], (1.0 - calibrated)[:, None] * misses[predicted])

    def realized(self, frame, target) -> float:
        target = np.asarray(target, dtype=np.int64)
        classes = int(max(target.max(), frame[CLASS_COLUMN].max())) + 1
        onehot = (target[:, None] == np.arange(classes)[None, :]).astype(float)
        return macro_auc(one_vs_rest_scores(frame, classes), onehot)

    def value(self, profile, frame, calibrator=None) -> float:
        scores = frame[VALUE_COLUMN].to_numpy(dtype=np.float64)
        calibrated = (calibrator or profile.calibrator)(scores)
        return macro_auc(
            one_vs_rest_scores(frame, self.classes(profile)),
            self.soft_labels(profile, frame, calibrated),
        )

    def realized_error(self, profile, rows: int) -> float:
        if rows < 1:
            return float("inf")
        shares = profile.state[self.metric]["class_share"]
        auc = profile.realized[self.metric]
        errors = [hanley_mcneil_se(auc, rows * s, rows * (1 - s)) for s in shares if s > 0]
        return math.sqrt(sum(e**2 for e in errors)) / len(errors) if errors else float("inf")

    def spread(self, profile, frame, calibrated) -> dict:
        scores = one_vs_rest_scores(frame, self.classes(profile))
        positive = self.soft_labels(profile, frame, calibrated)
        rng = np.random.default_rng(0)
        units, biases = [], []
        for rows in SPREAD_ROWS:
            draws = rng.integers(0, len(scores), size=(SPREAD_RESAMPLES, rows))
            values = np.array([macro_auc(scores[d], positive[d]) for d in draws])
            units.append(float(np.nanstd(values) * math.sqrt(rows)))
            biases.append(float(np.nanmean(values)) - profile.estimated[self.metric])
        return {"rows": list(SPREAD_ROWS), "unit_std": units, "bias": biases}

    def floor(self, profile) -> float:
        return 0.0  # soft labels of other classes' records are not monotone in p


register(BinaryRocAuc())
register(MulticlassRocAuc())
