"""The gap between a metric on the training and the validation split, as recorded.

Name: ``overfitting``; the result is ``overfitting_<metric>``. Tasks: all.
Needs: train_metrics, val_metrics.

Threshold: ``max_gap``, the largest acceptable ``|train - val|`` of ``metric`` (default:
the task's headline metric, ``roc_auc`` / ``accuracy`` / ``r2``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from pydantic import Field

from driftgate.gates.checks.registry import (
    CheckSettings,
    GateCheck,
    GateInputs,
    register,
    timed,
)
from driftgate.gates.result import CheckResult, fmt
from driftgate.training.evaluate import HEADLINE_METRIC, MetricName
from driftgate.training.features import TASKS


class OverfittingCheck(CheckSettings):
    metric: MetricName | None = Field(
        None, description="default: roc_auc (binary), accuracy (multiclass), r2 (regression)"
    )
    max_gap: float = Field(0.1, ge=0.0, description="|train - val| of the metric")


def check_overfitting(
    train_metrics: Mapping[str, float],
    val_metrics: Mapping[str, float],
    settings: OverfittingCheck,
    task: str = "binary",
) -> CheckResult:
    metric = settings.metric or HEADLINE_METRIC[task]

    def run() -> CheckResult:
        train, val = train_metrics.get(metric), val_metrics.get(metric)
        if train is None or val is None or math.isnan(train) or math.isnan(val):
            return CheckResult(
                "overfitting",
                False,
                "missing",
                f"<= {settings.max_gap:g}",
                f"train/val {metric} not recorded on the training run",
            )
        gap = abs(train - val)
        ok = gap <= settings.max_gap
        return CheckResult(
            f"overfitting_{metric}",
            ok,
            f"gap {gap:.4f} (train {fmt(train)}, val {fmt(val)})",
            f"<= {settings.max_gap:g}",
            "" if ok else f"train/validation {metric} gap {gap:.4f} suggests overfitting",
        )

    return timed(run)


def _run(inputs: GateInputs, settings: OverfittingCheck) -> CheckResult:
    return check_overfitting(inputs.train_metrics, inputs.val_metrics, settings, inputs.task)


register(
    GateCheck(
        name="overfitting",
        run=_run,
        applies_to=TASKS,
        settings=OverfittingCheck,
        needs=("train_metrics", "val_metrics"),
        summary="|train - val| of a metric recorded on the training run",
    )
)
