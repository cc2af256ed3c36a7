"""Estimated metrics (``performance_estimate:<metric>``): one module per metric, each
registering one class per task it applies to (:mod:`monitors.estimates.registry`).
Importing the package imports every module in it, so adding a metric is one module."""

import importlib
import pkgutil

from driftgate.monitors.estimates import accuracy, mae, rmse, roc_auc  # noqa: F401 - registers
from driftgate.monitors.estimates.registry import (
    ESTIMATED,
    EstimatedMetric,
    UnknownEstimatedMetricError,
    estimable,
    get_estimate,
    known_metrics,
    register,
)

for _module in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
    if not _module.name.startswith("_") and _module.name not in (
        "registry",
        "calibration",
        "loss_model",
        "reliability",
    ):
        importlib.import_module(f"{__name__}.{_module.name}")

__all__ = [
    "ESTIMATED",
    "EstimatedMetric",
    "UnknownEstimatedMetricError",
    "estimable",
    "get_estimate",
    "known_metrics",
    "register",
]
