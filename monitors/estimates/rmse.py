"""``rmse`` of a regression model by direct loss estimation (DLE, as NannyML does it):
a model of each record's squared error, from its features and its prediction, fitted
on the reference; a window's RMSE is the root of its mean predicted squared error
(:mod:`monitors.estimates.loss_model`). Realized error: the delta method on the
reference's squared errors, ``sd(e²) / (2·RMSE·√n)``."""

from __future__ import annotations

import math

import numpy as np

from driftgate.monitors.estimates.loss_model import DirectLossEstimate
from driftgate.monitors.estimates.registry import register


class RegressionRmse(DirectLossEstimate):
    metric = "rmse"

    def loss(self, target, predicted):
        return (np.asarray(target) - np.asarray(predicted)) ** 2

    def aggregate(self, losses) -> float:
        return math.sqrt(float(np.mean(losses))) if len(losses) else math.nan

    def unit_std(self, losses) -> float:
        root = self.aggregate(losses)
        return float(np.std(losses) / (2 * root)) if root > 0 else 0.0


register(RegressionRmse())
