"""``accuracy`` estimated from calibrated confidences: the mean expected hit.

Binary: a record predicted 1 is right with its calibrated P(class 1), one predicted 0
with the rest. Multiclass: the calibrator maps the top class's probability to the
chance that the top class is right. The no-drift spread is exact (a mean of
per-record expected hits); the realized error binomial.
"""

from __future__ import annotations

import math

import numpy as np

from driftgate.monitors.estimates.calibration import CLASS_COLUMN, VALUE_COLUMN
from driftgate.monitors.estimates.registry import SPREAD_ROWS, EstimatedMetric, register


class _Accuracy(EstimatedMetric):
    metric = "accuracy"

    def realized(self, frame, target) -> float:
        return float(np.mean(frame[CLASS_COLUMN].to_numpy() == np.asarray(target).astype(int)))

    def expected_hits(self, profile, frame, calibrated: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def value(self, profile, frame, calibrator=None) -> float:
        scores = frame[VALUE_COLUMN].to_numpy(dtype=np.float64)
        calibrated = (calibrator or profile.calibrator)(scores)
        return float(self.expected_hits(profile, frame, calibrated).mean())

    def realized_error(self, profile, rows: int) -> float:
        if rows < 1:
            return float("inf")
        reference = profile.realized[self.metric]
        return math.sqrt(reference * (1 - reference) / rows)

    def spread(self, profile, frame, calibrated) -> dict:
        unit = float(self.expected_hits(profile, frame, calibrated).std())
        return {"rows": list(SPREAD_ROWS), "unit_std": [unit] * len(SPREAD_ROWS)}


class BinaryAccuracy(_Accuracy):
    task = "binary"

    def expected_hits(self, profile, frame, calibrated):
        return np.where(frame[CLASS_COLUMN].to_numpy() == 1, calibrated, 1.0 - calibrated)

    def floor(self, profile) -> float:
        grid = np.linspace(0.0, 1.0, 1001)
        calibrated = profile.calibrator(grid)
        return float(np.where(grid >= profile.decision_threshold, calibrated, 1 - calibrated).min())


class MulticlassAccuracy(_Accuracy):
    task = "multiclass"

    def expected_hits(self, profile, frame, calibrated):
        return calibrated  # the calibrated chance that the top class is right

    def floor(self, profile) -> float:
        grid = np.linspace(0.0, 1.0, 1001)
        calibrated = profile.calibrator(grid)
        return float(calibrated[grid >= 1 / max(len(profile.classes), 2)].min())


register(BinaryAccuracy())
register(MulticlassAccuracy())
