"""The model does not predict one class for (almost) every held-out row.

Name: ``degenerate_output``. Tasks: all. Needs: probabilities.

Threshold: ``max_single_class_share``, the largest acceptable share of held-out rows
given the most-predicted class (binary: at ``serving.decision_threshold``, where the
service turns P(class 1) into a class; multiclass: the most probable class), default
98%. A regression model is degenerate when its predictions are constant: their spread
is at most ``min_relative_spread`` times the mean's magnitude (plus 1e-12).
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
from driftgate.gates.result import CheckResult
from driftgate.training.evaluate import DECISION_THRESHOLD
from driftgate.training.features import TASKS


class DegenerateOutputCheck(CheckSettings):
    max_single_class_share: float = Field(0.98, gt=0.0, le=1.0)
    min_relative_spread: float = Field(
        1e-6, ge=0.0, description="regression: std of predictions / (|mean| + 1e-12)"
    )


def _regression_spread(values: np.ndarray, settings: DegenerateOutputCheck) -> CheckResult:
    spread = float(values.std()) / (abs(float(values.mean())) + 1e-12)
    ok = spread > settings.min_relative_spread
    return CheckResult(
        "degenerate_output",
        ok,
        f"relative spread {spread:.3g}",
        f"> {settings.min_relative_spread:g}",
        "" if ok else f"the same value ({values.mean():.6g}) is predicted for every held-out row",
    )


def check_degenerate_output(
    probabilities: np.ndarray,
    settings: DegenerateOutputCheck,
    task: str = "binary",
    decision_threshold: float = DECISION_THRESHOLD,
) -> CheckResult:
    """The model does not predict one class (or one value) for (almost) every held-out row."""

    def run() -> CheckResult:
        probabilities_ = np.asarray(probabilities, dtype=np.float64)
        if not np.isfinite(probabilities_).all():
            return CheckResult(
                "degenerate_output",
                False,
                "non-finite outputs",
                f"<= {settings.max_single_class_share:.2%}",
                "predictions contain NaN/Inf; see finite_outputs",
            )
        if task == "regression":
            return _regression_spread(probabilities_.ravel(), settings)
        if task == "multiclass":
            counts = np.bincount(probabilities_.reshape(len(probabilities_), -1).argmax(axis=1))
            share, majority = float(counts.max() / counts.sum()), str(int(counts.argmax()))
        else:
            predicted_positive = float((probabilities_ >= decision_threshold).mean())
            share = max(predicted_positive, 1 - predicted_positive)
            majority = "1" if predicted_positive >= 0.5 else "0"  # a share: the larger half
        ok = share <= settings.max_single_class_share
        return CheckResult(
            "degenerate_output",
            ok,
            f"{share:.2%} class {majority}",
            f"<= {settings.max_single_class_share:.2%}",
            "" if ok else f"class {majority} predicted for {share:.2%} of held-out rows",
        )

    return timed(run)


def _run(inputs: GateInputs, settings: DegenerateOutputCheck) -> CheckResult:
    return check_degenerate_output(
        inputs.probabilities, settings, inputs.task, inputs.decision_threshold
    )


register(
    GateCheck(
        name="degenerate_output",
        run=_run,
        applies_to=TASKS,
        settings=DegenerateOutputCheck,
        needs=("probabilities",),
        summary="the most-predicted class is at most this share of held-out rows "
        "(regression: predictions are not constant)",
    )
)
