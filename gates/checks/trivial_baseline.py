"""The candidate must beat a constant answer on the rows that matter most.

Name: ``trivial_baseline``; results ``trivial_baseline_<metric>``. Tasks: all.
Needs: judged_slice, judged_targets, judged_outputs (the recent slice of
``promotion.recent`` when the gate has one, else the configured held-out split).

A model worse than always answering the majority class is worse than no model (issue
29: the demo's retrained v2 scored 0.53 where always "no rain" scored 0.65, and the
gate promoted it because it compared it only with the champion). The constant is the
best one for the judged rows themselves (their class prior, majority class, or mean):
the strictest constant, so beating it means the model's inputs carry information.

Classification: accuracy against the majority class's share, and log loss against the
prior's log loss; regression: RMSE against the mean's. Each is a one-sided paired
sign-flip test (:mod:`driftgate.gates.paired`) at ``confidence``: on 30 rows a
candidate must be clearly better, not luckily so.
"""

from __future__ import annotations

import numpy as np
from pydantic import Field

from driftgate.gates.checks.registry import (
    CheckSettings,
    GateCheck,
    GateInputs,
    register,
    timed,
)
from driftgate.gates.paired import compare_paired, constant_outputs, row_losses
from driftgate.gates.result import CheckResult, fmt, not_applicable
from driftgate.training.features import TASKS

BASELINE_METRICS = {
    "binary": ("accuracy", "log_loss"),
    "multiclass": ("accuracy", "log_loss"),
    "regression": ("rmse",),
}
CONSTANT = {"accuracy": "majority class", "log_loss": "class prior", "rmse": "mean"}


class TrivialBaselineCheck(CheckSettings):
    confidence: float = Field(
        0.95,
        gt=0.5,
        lt=1.0,
        description="the candidate must beat the constant by a one-sided paired test at "
        "this confidence (p <= 1 - confidence)",
    )
    min_rows: int = Field(
        30, ge=1, description="fewer judged rows: not applicable (too few to judge)"
    )


def check_trivial_baseline(
    task: str,
    judged_slice: str,
    targets,
    outputs,
    settings: TrivialBaselineCheck,
    n_classes: int = 2,
    decision_threshold: float = 0.5,
) -> list[CheckResult]:
    rows = len(targets)
    if rows < settings.min_rows:
        return [
            not_applicable(
                "trivial_baseline",
                f"{rows} row(s) in the {judged_slice}, fewer than "
                f"model_checks.trivial_baseline.min_rows {settings.min_rows}",
            )
        ]
    if not np.isfinite(np.asarray(outputs, np.float64)).all():
        return [
            CheckResult(
                "trivial_baseline",
                False,
                "non-finite outputs",
                "finite",
                f"the candidate's outputs on the {judged_slice} are not all finite",
            )
        ]
    constant = constant_outputs(task, targets, n_classes, rows)
    bar = f"beats the constant, p <= {1 - settings.confidence:.3g}"
    results = []
    for metric in BASELINE_METRICS[task]:

        def run(metric: str = metric) -> CheckResult:
            try:
                model_loss = row_losses(task, metric, targets, outputs, decision_threshold)
            except (ValueError, IndexError) as exc:  # a misshapen output: output_shape names it
                return CheckResult(
                    f"trivial_baseline_{metric}",
                    False,
                    "unreadable outputs",
                    "-",
                    f"cannot score the outputs: {exc}",
                )
            constant_loss = row_losses(task, metric, targets, constant, decision_threshold)
            versus = compare_paired(model_loss, constant_loss, settings.confidence)
            model_value, constant_value = (
                _value(metric, model_loss),
                _value(metric, constant_loss),
            )
            observed = (
                f"{fmt(model_value)} vs {CONSTANT[metric]} {fmt(constant_value)} on the "
                f"{judged_slice} (p {versus.p_value:.3g})"
            )
            message = (
                ""
                if versus.better
                else f"{metric} {fmt(model_value)} does not beat always answering the "
                f"{CONSTANT[metric]} ({fmt(constant_value)}) on the {judged_slice} beyond "
                f"sampling error (p {versus.p_value:.3g})"
            )
            return CheckResult(f"trivial_baseline_{metric}", versus.better, observed, bar, message)

        results.append(timed(run))
    return results


def _value(metric: str, losses) -> float:
    mean = float(losses.mean())
    return {"accuracy": 1.0 - mean, "rmse": mean**0.5}.get(metric, mean)


def _run(inputs: GateInputs, settings: TrivialBaselineCheck) -> list[CheckResult]:
    return check_trivial_baseline(
        inputs.task,
        inputs.judged_slice,
        inputs.judged_targets,
        inputs.judged_outputs,
        settings,
        n_classes=inputs.n_outputs,
        decision_threshold=inputs.decision_threshold,
    )


register(
    GateCheck(
        name="trivial_baseline",
        run=_run,
        applies_to=TASKS,
        settings=TrivialBaselineCheck,
        needs=("judged_slice", "judged_targets", "judged_outputs"),
        summary="beats the majority class / class prior / mean on the recent slice "
        "(else the held-out split), beyond sampling error",
    )
)
