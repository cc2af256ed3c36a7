"""The model's outputs: ``prediction_drift`` (KS on the output value, chi-squared on the
class) and ``performance_estimate:<metric>`` (a confidence-based estimate, a metric of
:mod:`monitors.estimates`), judged on the window's stored outputs against the outputs
profile of the champion (:mod:`monitors.outputs`)."""

from __future__ import annotations

from driftgate.monitors.estimates import known_metrics
from driftgate.monitors.kinds.registry import MonitorKind, WindowEvidence, register
from driftgate.monitors.results import PERFORMANCE_ESTIMATE, PREDICTION_DRIFT, split_metric


class _OutputsKind(MonitorKind):
    features_must_be_all = True

    def evaluate(self, monitors, evidence: WindowEvidence):
        from driftgate.monitors.outputs import evaluate_output_monitor

        outputs = getattr(evidence.profile, "outputs", None)
        return [evaluate_output_monitor(m, outputs, evidence.samples) for m in monitors]


class PredictionDriftKind(_OutputsKind):
    name = "prediction_drift"
    syntax = PREDICTION_DRIFT

    def matches(self, metric: str) -> bool:
        return metric == PREDICTION_DRIFT


class PerformanceEstimateKind(_OutputsKind):
    name = "performance_estimate"
    syntax = f"{PERFORMANCE_ESTIMATE}:<metric>"

    def matches(self, metric: str) -> bool:
        return split_metric(metric)[0] == PERFORMANCE_ESTIMATE

    def validate_metric(self, metric: str) -> None:
        argument = split_metric(metric)[1]
        if argument not in known_metrics():
            raise ValueError(
                f"unknown estimated metric '{argument}' in '{metric}' "
                f"(known: {', '.join(known_metrics())})"
            )

    def validate(self, monitor) -> None:
        super().validate(monitor)
        if monitor.threshold < 0:
            raise ValueError(
                f"metric {monitor.metric}: threshold is the largest tolerated drop from the "
                f"reference estimate and must be >= 0, got {monitor.threshold:g}"
            )


register(PredictionDriftKind())
register(PerformanceEstimateKind())
