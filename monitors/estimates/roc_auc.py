"""``roc_auc`` of a binary classifier estimated from calibrated confidences: ROC AUC
with soft labels (each record positive with its calibrated P(class 1)). Its no-drift
spread and small-window bias are bootstrapped on the reference; the realized error is
Hanley-McNeil's. A window's estimate is never below 0.5 (the calibrator is monotone)."""

from __future__ import annotations

import math

import numpy as np

from driftgate.monitors.estimates.calibration import (
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


register(BinaryRocAuc())
