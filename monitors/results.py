"""What a monitor says about one window (:class:`MonitorResult`), and the metric names
every monitor kind shares: a small leaf module, so that the kinds (traffic, outputs,
performance) and the actions can name a result without importing the rules."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

CONTRACT_PREFIX = "contract:"
# Metrics on the model's outputs, read from the profile's outputs (monitors.outputs), not
# from the drift statistics: ``prediction_drift`` and ``performance_estimate:<metric>``.
PREDICTION_DRIFT = "prediction_drift"
PERFORMANCE_ESTIMATE = "performance_estimate"


def split_metric(metric: str) -> tuple[str, str | None]:
    """A monitor metric as ``(name, argument)``: ``performance_estimate:roc_auc`` ->
    ``("performance_estimate", "roc_auc")``, ``ks`` -> ``("ks", None)``.

    The one parser of the ``name:argument`` form, for every metric family that takes
    one (``contract:<kind>``, ``performance_estimate:<metric>``, ``performance:<metric>``).
    """
    name, colon, argument = metric.partition(":")
    return (name, argument) if colon else (metric, None)


def breach_comparison(observed: float | None, threshold: float, p_value: bool) -> str:
    """How a breach reads: ``p = 7.5e-08 < 0.05`` for a p-value, which breaches below
    its level (``7.5e-08 > 0.05`` read backwards), else ``0.31 > 0.1``. The one wording
    of a review's line, in the action's text and in ``driftgate reviews list``."""
    shown = "-" if observed is None else f"{observed:.4g}"
    return f"p = {shown} < {threshold:g}" if p_value else f"{shown} > {threshold:g}"


@dataclass(frozen=True)
class MonitorResult:
    """One monitor on one window.

    ``status`` is ``ok`` (evaluated), ``no_data`` (empty window or all values missing:
    reported, never a silent pass), ``insufficient_data`` (too few rows for any outcome
    to be significant at the monitor's level: never a pass, never a breach) or
    ``error`` (the metric cannot be evaluated). ``observed`` is the worst value among
    the monitor's features (largest distance, smallest p-value, most failed contract
    rules; for ``performance_estimate:<metric>`` the estimate, with its sampling error
    and reference in ``details``); ``p_value`` the smallest p-value of a calibrated
    decision, ``level`` its per-feature level and ``min_detectable`` the smallest value
    the window could flag.
    """

    monitor: str
    metric: str
    action: str
    threshold: float
    breached: bool
    observed: float | None
    status: str = "ok"
    breached_features: list[str] = field(default_factory=list)
    reason: str = ""
    p_value: float | None = None
    level: float | None = None
    bias_corrected: float | None = None
    min_detectable: float | None = None
    # p-value tests: the smallest effect size that may count as drift (shown, settable).
    effect_size_floor: float | None = None
    # Metric-specific facts for the report (an estimate's value, sampling error, ...).
    details: dict = field(default_factory=dict)
    # Performance monitors: labelled records, the realized metric and its interval, and
    # the champion's test metric it is compared with (``observed`` is the drop).
    labels: int | None = None
    realized: float | None = None
    ci: tuple[float, float] | None = None
    baseline: float | None = None

    def to_dict(self) -> dict:
        data = asdict(self)
        if data["ci"] is not None:
            data["ci"] = [v if math.isfinite(v) else str(v) for v in data["ci"]]
        for key in ("observed", "p_value", "bias_corrected", "min_detectable", "realized"):
            if data[key] is not None and not math.isfinite(data[key]):
                data[key] = str(data[key])
        return data
