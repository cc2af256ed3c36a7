"""Estimated metrics, one class per (metric, task), in the shape of NannyML's CBPE
metrics: each knows how to compute itself from a window's stored outputs and the
reference's calibrator, how to realize itself on labels, its sampling error, its
no-drift spread on the reference and the lowest value any window can give.

``performance_estimate:<metric>`` monitors, the outputs profile and ``monitors plan``
ask this registry; nothing outside :mod:`monitors.estimates` switches on a metric's
name. Adding one is one module in this package (imported by its ``__init__``) that
calls :func:`register`.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
import pandas as pd

from driftgate.core.errors import DriftgateError

# Window sizes at which the no-drift spread of an estimate is measured on the reference
# (bootstrap); between them it is interpolated, beyond them held.
SPREAD_ROWS = (20, 50, 200, 1000)


class UnknownEstimatedMetricError(DriftgateError, KeyError):
    """A ``performance_estimate:<metric>`` no registered estimate computes."""

    exit_code = 2

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class EstimatedMetric:
    """One metric estimated for one task from the calibrated outputs (and, for a metric
    that ``uses_features``, the window's features).

    ``profile`` below is the champion's :class:`monitors.outputs.OutputsProfile`
    (``task``, ``classes``, ``decision_threshold``, ``calibrator``, ``realized``,
    ``estimated``, ``positive_share``); ``frame`` holds the stored output columns
    (:data:`monitors.estimates.calibration.VALUE_COLUMN` / ``CLASS_COLUMN``) and, when
    the metric ``uses_features``, the feature columns; ``profile.state[metric]`` is what
    :meth:`fit` returned.
    """

    metric: ClassVar[str]
    task: ClassVar[str]
    # An error metric (RMSE, MAE) is worse when higher: its "drop" is a rise.
    higher_is_better: ClassVar[bool] = True
    # Reads the window's feature columns besides its outputs (DLE's loss model does).
    uses_features: ClassVar[bool] = False

    def fit(
        self, profile: Any, frame: pd.DataFrame, target: np.ndarray, features: pd.DataFrame | None
    ) -> dict:
        """What this metric fits on the reference beyond the calibrator, as plain JSON
        numbers (kept in the profile's ``state[metric]``, never pickled); ``features``
        is None when the caller has none (then a metric that needs them raises
        :class:`~monitors.estimates.calibration.OutputsError`)."""
        return {}

    def reference_std(
        self, profile: Any, frame: pd.DataFrame, outcomes: np.ndarray
    ) -> float | None:
        """The reference estimate's own error; None: measured by refitting the
        calibrator on bootstrap references (:func:`monitors.outputs._reference_std`)."""
        return None

    def realized(self, frame: pd.DataFrame, target: np.ndarray) -> float:
        """The metric on labelled outputs (``target``: 0/1, or the class index)."""
        raise NotImplementedError

    def value(self, profile: Any, frame: pd.DataFrame, calibrator=None) -> float:
        """The estimate of a window (``calibrator``: the profile's unless given)."""
        raise NotImplementedError

    def realized_error(self, profile: Any, rows: int) -> float:
        """Sampling error of the realized metric on ``rows`` records like the reference."""
        raise NotImplementedError

    def spread(self, profile: Any, frame: pd.DataFrame, calibrated: np.ndarray) -> dict:
        """The estimate's no-drift spread on the reference: ``rows`` (``SPREAD_ROWS``),
        ``unit_std`` per size (times sqrt(rows)), optionally ``bias`` per size."""
        raise NotImplementedError

    def floor(self, profile: Any) -> float:
        """The worst estimate any window can give (what a significant drop is bounded
        by): the lowest for a score, ``inf`` for an unbounded error metric."""
        raise NotImplementedError


ESTIMATED: dict[tuple[str, str], EstimatedMetric] = {}


def register(estimate: EstimatedMetric) -> EstimatedMetric:
    key = (estimate.task, estimate.metric)
    if key in ESTIMATED:
        raise ValueError(f"estimated metric {estimate.metric!r} for {estimate.task} twice")
    ESTIMATED[key] = estimate
    return estimate


def estimable(task: str) -> tuple[str, ...]:
    """The metrics a model of ``task`` can have estimated, in registration order."""
    return tuple(metric for (t, metric) in ESTIMATED if t == task)


def known_metrics() -> tuple[str, ...]:
    """Every metric some task can have estimated (what a config may name)."""
    return tuple(dict.fromkeys(metric for _, metric in ESTIMATED))


def get_estimate(task: str, metric: str) -> EstimatedMetric:
    try:
        return ESTIMATED[(task, metric)]
    except KeyError:
        raise UnknownEstimatedMetricError(
            f"performance_estimate:{metric} does not apply to a {task} model "
            f"(estimable: {', '.join(estimable(task)) or 'none'})"
        ) from None
