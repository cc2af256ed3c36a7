"""What every estimated metric reads: the stored output columns, the calibrator of a
classifier's outputs, ROC AUC with soft labels and its sampling error. A leaf module,
so that each estimated metric (one module each, :mod:`monitors.estimates`) and the
outputs profile (:mod:`monitors.outputs`) share it without importing each other."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from driftgate.core.errors import DriftgateError

# The columns the sample store keeps per record (stores.samples.OUTPUT_COLUMNS): the
# value (binary: P(class 1); multiclass: the top class's probability; regression: the
# prediction) and the class (binary: 0/1; multiclass: the class index).
VALUE_COLUMN = "prediction"
CLASS_COLUMN = "predicted_class"


class OutputsError(DriftgateError, ValueError):
    """Outputs that cannot be profiled, calibrated or estimated from; the message says why."""


@dataclass(frozen=True)
class Calibrator:
    """An isotonic map from a classifier's output to the chance of a hit, as knots.

    Binary: output P(class 1) -> calibrated P(class 1). Multiclass: the top class's
    probability -> the chance that the top class is right. Between knots the map is
    linear and outside them constant (``sklearn.isotonic.IsotonicRegression`` with
    ``out_of_bounds="clip"`` predicts exactly so).
    """

    x: np.ndarray
    y: np.ndarray
    method: str = "isotonic"

    @classmethod
    def fit(cls, scores: np.ndarray, hits: np.ndarray) -> Calibrator:
        from sklearn.isotonic import IsotonicRegression

        scores = np.asarray(scores, dtype=np.float64)
        hits = np.asarray(hits, dtype=np.float64)
        if scores.size < 2 or np.unique(hits).size < 2:
            raise OutputsError(
                f"calibration needs at least two outcomes of each kind; got {scores.size} "
                f"reference outputs with outcomes {sorted(set(hits.tolist()))}"
            )
        model = IsotonicRegression(y_min=0.0, y_max=1.0, out_of_bounds="clip").fit(scores, hits)
        return cls(
            x=np.asarray(model.X_thresholds_, dtype=np.float64),
            y=np.asarray(model.y_thresholds_, dtype=np.float64),
        )

    def __call__(self, scores: np.ndarray) -> np.ndarray:
        return np.interp(np.asarray(scores, dtype=np.float64), self.x, self.y)

    def to_json(self) -> dict[str, Any]:
        return {"method": self.method, "x": self.x.tolist(), "y": self.y.tolist()}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Calibrator:
        if data.get("method") != "isotonic":
            raise OutputsError(f"unknown calibrator method {data.get('method')!r}")
        x, y = np.asarray(data["x"], dtype=np.float64), np.asarray(data["y"], dtype=np.float64)
        if x.shape != y.shape or x.size == 0 or np.any(np.diff(x) < 0):
            raise OutputsError("calibrator knots must be non-empty, paired and sorted")
        return cls(x=x, y=y)


def expected_roc_auc(scores: np.ndarray, positive: np.ndarray) -> float:
    """ROC AUC with soft labels: each record is positive with chance ``positive``.

    The expected true and false positive counts above every threshold, integrated as
    ROC AUC is (ties count one half); with 0/1 ``positive`` this is the ordinary ROC AUC.
    NaN when the expected positives or negatives are zero.
    """
    scores = np.asarray(scores, dtype=np.float64)
    positive = np.asarray(positive, dtype=np.float64)
    distinct, group = np.unique(scores, return_inverse=True)
    pos = np.bincount(group, weights=positive, minlength=distinct.size)
    neg = np.bincount(group, weights=1.0 - positive, minlength=distinct.size)
    total_pos, total_neg = pos.sum(), neg.sum()
    if total_pos <= 0 or total_neg <= 0:
        return float("nan")
    below = np.concatenate([[0.0], np.cumsum(neg)[:-1]])
    return float(np.sum(pos * (below + neg / 2)) / (total_pos * total_neg))


def hanley_mcneil_se(auc: float, positives: float, negatives: float) -> float:
    """Standard error of a ROC AUC on ``positives`` and ``negatives`` records
    (Hanley & McNeil 1982)."""
    if positives < 1 or negatives < 1 or not math.isfinite(auc):
        return float("inf")
    q1, q2 = auc / (2 - auc), 2 * auc**2 / (1 + auc)
    variance = (
        auc * (1 - auc) + (positives - 1) * (q1 - auc**2) + (negatives - 1) * (q2 - auc**2)
    ) / (positives * negatives)
    return math.sqrt(max(variance, 0.0))
