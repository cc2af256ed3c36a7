"""Realized performance: the model's metric on the labelled records of a window,
with its sampling error, against the champion's gate-time test metric.

A monitor ``performance:<metric>`` (``performance:roc_auc``, ``performance:rmse``, any
metric of the task in :data:`training.evaluate.TASK_METRICS`) reads the window's
records that have a label (``POST /feedback``, ``driftgate labels load``), computes the
metric, and a bootstrap standard error of it (``RESAMPLES`` resamples of the labelled
records, seeded: the same labels give the same verdict). It breaches when the *drop*
from the champion's ``test_<metric>`` (oriented so that positive is worse: lower AUC,
higher RMSE) exceeds the monitor's threshold **and** is significant at the monitor's
level (one-sided, normal approximation with the bootstrap standard error; a
``calibrated: false`` monitor uses the bare threshold). Fewer than ``min_labels``
labels, or labels that leave the metric undefined (an AUC over one class), are
``insufficient_data``: never a pass, never a breach.

The samples keep one output per record (P(class 1) / the predicted class / the value),
so for multiclass models ``accuracy`` and ``macro_f1`` are available and ``log_loss``
(which needs every class's probability) is an error naming why.

The metric functions here are numpy re-statements of :mod:`training.evaluate` (the
bootstrap calls them hundreds of times, sklearn's per-call overhead would dominate);
``tests/monitors/test_performance.py`` checks that they agree with it.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from driftgate.training.evaluate import DECISION_THRESHOLD, TASK_METRICS

PERFORMANCE_PREFIX = "performance:"
RESAMPLES = 200
# The interval reported beside the value (the decision uses the monitor's own level).
INTERVAL = 0.95
HIGHER_IS_BETTER = {
    "accuracy": True,
    "roc_auc": True,
    "macro_f1": True,
    "r2": True,
    "log_loss": False,
    "rmse": False,
    "mae": False,
}
PERFORMANCE_METRICS: tuple[str, ...] = tuple(
    dict.fromkeys(name for names in TASK_METRICS.values() for name in names)
)


class PerformanceUnavailable(ValueError):
    """The metric cannot be computed from what the samples keep (the message says why)."""


def _accuracy_binary(decision_threshold: float) -> Callable[[np.ndarray, np.ndarray], float]:
    def accuracy(y: np.ndarray, p: np.ndarray) -> float:
        return float(np.mean((p >= decision_threshold) == (y == 1)))

    return accuracy


def _roc_auc(y: np.ndarray, p: np.ndarray) -> float:
    from scipy.stats import rankdata

    positives = int(y.sum())
    negatives = len(y) - positives
    if positives == 0 or negatives == 0:
        return math.nan  # undefined on one class, as in training.evaluate
    ranks = rankdata(p)
    return float((ranks[y == 1].sum() - positives * (positives + 1) / 2) / (positives * negatives))


def _log_loss(y: np.ndarray, p: np.ndarray) -> float:
    p = np.clip(p, 1e-7, 1 - 1e-7)
    return float(-np.mean(y * np.log(p) + (1 - y) * np.log(1 - p)))


def _accuracy_index(y: np.ndarray, predicted: np.ndarray) -> float:
    return float(np.mean(predicted == y))


def _macro_f1(classes: int) -> Callable[[np.ndarray, np.ndarray], float]:
    def macro_f1(y: np.ndarray, predicted: np.ndarray) -> float:
        scores = []
        for c in range(classes):
            tp = np.sum((predicted == c) & (y == c))
            wrong = np.sum((predicted == c) != (y == c))  # fp + fn
            scores.append(2 * tp / (2 * tp + wrong) if 2 * tp + wrong else 0.0)
        return float(np.mean(scores))

    return macro_f1


def _rmse(y: np.ndarray, v: np.ndarray) -> float:
    return float(np.sqrt(np.mean((v - y) ** 2)))


def _mae(y: np.ndarray, v: np.ndarray) -> float:
    return float(np.mean(np.abs(v - y)))


def _r2(y: np.ndarray, v: np.ndarray) -> float:
    spread = float(((y - y.mean()) ** 2).sum())
    return 1.0 - float(((v - y) ** 2).sum()) / spread if spread > 0 else math.nan


def metric_function(
    task: str, metric: str, classes: int = 0, decision_threshold: float = DECISION_THRESHOLD
):
    """``f(y, outputs) -> float`` for ``metric`` of ``task``; outputs are what a sample
    keeps: P(class 1) (binary, a class at ``decision_threshold``: the service's), the
    predicted class index (multiclass), the value (regression). PerformanceUnavailable
    when the task has no such metric or the samples cannot give it."""
    if metric not in TASK_METRICS.get(task, ()):
        raise PerformanceUnavailable(
            f"'{metric}' is not a metric of a {task} model (its metrics: "
            f"{', '.join(TASK_METRICS.get(task, ()))})"
        )
    if task == "binary":
        if metric == "accuracy":
            return _accuracy_binary(decision_threshold)
        return {"roc_auc": _roc_auc, "log_loss": _log_loss}[metric]
    if task == "multiclass":
        if metric == "log_loss":
            raise PerformanceUnavailable(
                "multiclass log_loss needs every class's probability; the samples keep the "
                "predicted class only (use performance:accuracy or performance:macro_f1)"
            )
        return _accuracy_index if metric == "accuracy" else _macro_f1(classes)
    return {"rmse": _rmse, "mae": _mae, "r2": _r2}[metric]


@dataclass(frozen=True)
class Realized:
    """A metric on ``labels`` labelled records: its value, bootstrap standard error and
    the INTERVAL confidence interval (normal, value ± z·se)."""

    metric: str
    value: float
    se: float
    ci: tuple[float, float]
    labels: int


def realized_performance(
    task: str,
    metric: str,
    y: np.ndarray,
    outputs: np.ndarray,
    *,
    classes: int = 0,
    decision_threshold: float = DECISION_THRESHOLD,
    resamples: int = RESAMPLES,
    seed: int = 0,
) -> Realized:
    """``metric`` of the labelled records and its bootstrap standard error.

    The value is NaN when the metric is undefined on these labels (AUC on one class,
    R² on a constant target); resamples where it is undefined are left out of the error.
    """
    from scipy.stats import norm

    y = np.asarray(y, dtype=float)
    outputs = np.asarray(outputs, dtype=float)
    if task != "regression":
        y = y.astype(int)
    if task == "multiclass":
        outputs = outputs.astype(int)
    function = metric_function(task, metric, classes, decision_threshold)
    value = function(y, outputs)
    n = len(y)
    if n < 2 or not math.isfinite(value):
        return Realized(metric, value, math.nan, (math.nan, math.nan), n)
    rng = np.random.default_rng(seed)
    draws = np.empty(resamples)
    for b in range(resamples):
        picked = rng.integers(0, n, n)
        draws[b] = function(y[picked], outputs[picked])
    finite = draws[np.isfinite(draws)]
    se = float(np.std(finite, ddof=1)) if len(finite) > 1 else math.nan
    z = float(norm.isf((1 - INTERVAL) / 2))
    return Realized(metric, value, se, (value - z * se, value + z * se), n)


@dataclass(frozen=True)
class Drop:
    """The change from the baseline, oriented so that positive is worse."""

    drop: float
    p_value: float | None  # one-sided: P(a drop this large | no drop)
    breached: bool
    min_detectable: float | None  # the smallest drop significant at the level


def judge_drop(realized: Realized, baseline: float, threshold: float, level: float | None) -> Drop:
    """Whether the drop from ``baseline`` exceeds ``threshold`` and, with a ``level``,
    is significant at it (normal approximation with the bootstrap standard error)."""
    from scipy.stats import norm

    higher = HIGHER_IS_BETTER[realized.metric]
    drop = (baseline - realized.value) if higher else (realized.value - baseline)
    se = realized.se
    if level is None:
        return Drop(drop, None, bool(drop > threshold), None)
    if not math.isfinite(se):
        return Drop(drop, None, False, None)
    # A zero error (every resample alike): any drop is certain, no drop is not one.
    p_value = (0.0 if drop > 0 else 1.0) if se == 0 else float(norm.sf(drop / se))
    detectable = float(norm.isf(level) * se)
    return Drop(drop, p_value, bool(drop > threshold and p_value <= level), detectable)


def evaluate_performance(
    monitor,
    *,
    task: str,
    classes: int,
    y: np.ndarray,
    outputs: np.ndarray,
    baseline: float | None,
    decision_threshold: float = DECISION_THRESHOLD,
    resamples: int = RESAMPLES,
):
    """A ``performance:<metric>`` monitor on one window's labelled records.

    ``y`` the labels' numbers and ``outputs`` the stored outputs of the same records
    (see :func:`metric_function`); ``baseline`` the champion's ``test_<metric>``;
    ``decision_threshold`` the service's (binary accuracy).
    Returns a :class:`monitors.rules.MonitorResult` whose ``observed`` is the drop.
    """
    from driftgate.monitors.results import MonitorResult, split_metric

    metric = split_metric(monitor.metric)[1]
    base = {
        "monitor": monitor.name,
        "metric": monitor.metric,
        "action": monitor.action,
        "threshold": monitor.threshold,
        "breached": False,
        "labels": len(y),
        "baseline": baseline,
    }
    try:
        metric_function(task, metric, classes)
    except PerformanceUnavailable as exc:
        return MonitorResult(**base, observed=None, status="error", reason=str(exc))
    if baseline is None or not math.isfinite(baseline):
        return MonitorResult(
            **base,
            observed=None,
            status="error",
            reason=f"the champion has no test_{metric} to compare with",
        )
    level = monitor.level(1)
    if len(y) < monitor.min_labels:
        return MonitorResult(
            **base,
            observed=None,
            status="insufficient_data",
            reason=f"{len(y)} labelled records < min_labels ({monitor.min_labels})",
            level=level,
        )
    realized = realized_performance(
        task,
        metric,
        y,
        outputs,
        classes=classes,
        decision_threshold=decision_threshold,
        resamples=resamples,
    )
    if not math.isfinite(realized.value):
        return MonitorResult(
            **base,
            observed=None,
            status="insufficient_data",
            reason=f"{metric} is undefined on these {len(y)} labels (one class only?)",
            level=level,
        )
    decision = judge_drop(realized, baseline, monitor.threshold, level)
    low, high = realized.ci
    reason = (
        f"{metric} {realized.value:.4g} [{low:.4g}, {high:.4g}] on {len(y)} labels vs "
        f"{baseline:.4g} at the gate: drop {decision.drop:.4g}"
    )
    if decision.p_value is not None:
        reason += f", p={decision.p_value:.2g} (level {level:.2g})"
    return MonitorResult(
        **{**base, "breached": decision.breached},
        observed=float(decision.drop),
        reason=reason,
        p_value=decision.p_value,
        level=level,
        min_detectable=decision.min_detectable,
        realized=realized.value,
        ci=realized.ci,
    )
