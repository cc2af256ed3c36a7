"""The model's outputs: ``prediction_drift`` (KS on the output value, chi-squared on the
class) and ``performance_estimate:<metric>`` (a confidence-based estimate, a metric of
:mod:`monitors.estimates`), judged on the window's stored outputs against the outputs
profile of the champion (:mod:`monitors.outputs`)."""

from __future__ import annotations

from dataclasses import dataclass

from driftgate.monitors.estimates import get_estimate, known_metrics
from driftgate.monitors.kinds.registry import (
    KindPlan,
    MonitorKind,
    WindowEvidence,
    register,
    uncalibrated_note,
)
from driftgate.monitors.results import PERFORMANCE_ESTIMATE, PREDICTION_DRIFT, split_metric


class _OutputsKind(MonitorKind):
    features_must_be_all = True

    def judge(self, monitor, outputs, samples):
        raise NotImplementedError

    def plan(self, monitor, profile, rows: int) -> KindPlan:
        outputs = getattr(profile, "outputs", None)
        if outputs is None:
            return KindPlan(
                note="the champion's profile has no outputs (fitted before they were "
                "profiled): no figures, and the monitor reports insufficient_data; train "
                "or adopt the model again"
            )
        return self.plan_outputs(monitor, outputs, rows)

    def plan_outputs(self, monitor, outputs, rows: int) -> KindPlan:
        raise NotImplementedError

    def evaluate(self, monitors, evidence: WindowEvidence):
        outputs = getattr(evidence.profile, "outputs", None)
        return [self.judge(m, outputs, evidence.samples) for m in monitors]


class PredictionDriftKind(_OutputsKind):
    name = "prediction_drift"
    syntax = PREDICTION_DRIFT

    def judge(self, monitor, outputs, samples):
        from driftgate.monitors.outputs import judge_prediction_drift

        return judge_prediction_drift(monitor, outputs, samples)

    def matches(self, metric: str) -> bool:
        return metric == PREDICTION_DRIFT

    def observed_is_p_value(self, metric: str) -> bool:
        return True  # the smallest p-value of its tests on the outputs (monitors.outputs)

    def plan_outputs(self, monitor, outputs, rows: int) -> KindPlan:
        from driftgate.monitors.outputs import prediction_tests

        tests = len(prediction_tests(outputs))
        return KindPlan(
            level=monitor.level(tests),
            tests=tests,
            note=uncalibrated_note(monitor)
            or "flags >= needs the window: KS on the output value and chi2 on the class "
            "decide on their own p-values",
        )


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

    def check_against_model(self, monitor, task: str) -> list[str]:
        from driftgate.monitors.estimates import estimable

        if split_metric(monitor.metric)[1] in estimable(task):
            return []
        return [
            f"{monitor.metric} does not apply to the champion, a {task} model "
            f"(estimable: {', '.join(estimable(task)) or 'none'})"
        ]

    def plan_outputs(self, monitor, outputs, rows: int) -> KindPlan:
        from driftgate.monitors.outputs import detectable_drop

        metric = split_metric(monitor.metric)[1]
        if metric not in outputs.estimated:
            return KindPlan(
                note=f"the champion's outputs profile holds no reference for {metric}: "
                "the monitor reports error; train or adopt the model again"
            )
        level = monitor.level(1)
        better = get_estimate(outputs.task, metric).higher_is_better
        drop = f"drop of {metric}" if better else f"rise of {metric}"
        return KindPlan(
            level=level,
            min_detectable=detectable_drop(
                outputs.null_error(metric, rows), monitor.threshold, level
            ),
            units=drop,
            note=uncalibrated_note(monitor),
        )

    def judge(self, monitor, outputs, samples):
        from driftgate.monitors.outputs import judge_performance_estimate

        return judge_performance_estimate(monitor, outputs, samples)

    def validate(self, monitor) -> None:
        super().validate(monitor)
        if monitor.threshold < 0:
            raise ValueError(
                f"metric {monitor.metric}: threshold is the largest tolerated drop from the "
                f"reference estimate and must be >= 0, got {monitor.threshold:g}"
            )


register(PredictionDriftKind())
register(PerformanceEstimateKind())


@dataclass(frozen=True)
class _HoldsOutputs:
    """A profile that is only its outputs (what the output kinds read of it)."""

    outputs: object


def evaluate_output_monitor(monitor, outputs, samples):
    """``prediction_drift`` or ``performance_estimate:<metric>`` on one window's samples
    against the champion's outputs profile, judged by the metric's kind."""
    from driftgate.monitors.kinds.registry import kind_of

    evidence = WindowEvidence(profile=_HoldsOutputs(outputs), samples=samples)
    (result,) = kind_of(monitor.metric).evaluate([monitor], evidence)
    return result
