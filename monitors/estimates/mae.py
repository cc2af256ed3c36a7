"""``mae`` of a regression model by direct loss estimation (DLE, as NannyML does it):
a model of each record's absolute error, from its features and its prediction, fitted
on the reference; a window's MAE is its mean predicted absolute error
(:mod:`monitors.estimates.loss_model`). Realized error: ``sd(|e|) / √n``."""

from __future__ import annotations

import math

import numpy as np

from driftgate.monitors.estimates.loss_model import DirectLossEstimate
from driftgate.monitors.estimates.registry import register


class RegressionMae(DirectLossEstimate):
    metric = "mae"

    def loss(self, target, predicted):
        return np.abs(np.asarray(target) - np.asarray(predicted))

    def aggregate(self, losses) -> float:
        return float(np.mean(losses)) if len(losses) else math.nan

    def unit_std(self, losses) -> float:
        return float(np.std(losses))


register(RegressionMae())
