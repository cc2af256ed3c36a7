"""``performance:<metric>``: the realized metric on the window's labelled records, its
drop from the champion's gate-time test metric (:mod:`monitors.performance`). One test
per window whatever the features; judged again as the window's labels arrive."""

from __future__ import annotations

from driftgate.monitors.kinds.registry import (
    KindPlan,
    MonitorKind,
    WindowEvidence,
    error_result,
    register,
    uncalibrated_note,
)
from driftgate.monitors.performance import PERFORMANCE_METRICS, PERFORMANCE_PREFIX
from driftgate.monitors.results import split_metric


class PerformanceKind(MonitorKind):
    name = "performance"
    syntax = f"{PERFORMANCE_PREFIX}<metric>"
    rejudged_as_labels_arrive = True

    def matches(self, metric: str) -> bool:
        return split_metric(metric)[0] == PERFORMANCE_PREFIX.rstrip(":")

    def validate_metric(self, metric: str) -> None:
        argument = split_metric(metric)[1]
        if argument not in PERFORMANCE_METRICS:
            raise ValueError(
                f"unknown performance metric '{argument}' (known: {', '.join(PERFORMANCE_METRICS)})"
            )

    def check_against(self, monitor, features, contract) -> list[str]:
        if monitor.features != "all":
            return [
                "features: a performance monitor judges the model's output, not features; "
                "leave features out"
            ]
        return []

    def check_against_model(self, monitor, task: str) -> list[str]:
        from driftgate.monitors.performance import PerformanceUnavailable, metric_function

        try:
            metric_function(task, split_metric(monitor.metric)[1])
        except PerformanceUnavailable as exc:
            return [f"{monitor.metric} cannot be judged on the champion, a {task} model: {exc}"]
        return []

    def plan(self, monitor, profile, rows: int) -> KindPlan:
        return KindPlan(
            level=monitor.level(1),
            note=uncalibrated_note(monitor)
            or "flags >= needs the labels a window gets, which arrive later (at least "
            f"min_labels: {monitor.min_labels}); the realized metric's error shrinks as "
            "1/sqrt(labels)",
        )

    def level_tests(self, monitor, features: int) -> int | None:
        return 1

    def evaluate(self, monitors, evidence: WindowEvidence):
        from driftgate.monitors.performance import evaluate_performance

        if evidence.labelled is None:
            return [error_result(m, evidence.labels_missing_reason, "no_data") for m in monitors]
        labelled = evidence.labelled()
        baseline = evidence.baseline or (lambda metric: None)
        return [
            evaluate_performance(
                m,
                task=labelled.task,
                classes=len(labelled.classes),
                y=labelled.y,
                outputs=labelled.outputs,
                baseline=baseline(split_metric(m.metric)[1]),
                decision_threshold=evidence.decision_threshold,
            )
            for m in monitors
        ]


register(PerformanceKind())
