"""The model does not predict one class for (almost) every held-out row.

Name: ``degenerate_output``. Tasks: binary. Needs: probabilities.

Threshold: ``max_single_class_share``, the largest acceptable share of held-out rows
given the most-predicted class (at the decision threshold), default 98%.
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


class DegenerateOutputCheck(CheckSettings):
    max_single_class_share: float = Field(0.98, gt=0.0, le=1.0)


def check_degenerate_output(
    probabilities: np.ndarray, settings: DegenerateOutputCheck
) -> CheckResult:
    """The model does not predict one class for (almost) every held-out row."""

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
        predicted_positive = float((probabilities_ >= DECISION_THRESHOLD).mean())
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
    return check_degenerate_output(inputs.probabilities, settings)


register(
    GateCheck(
        name="degenerate_output",
        run=_run,
        settings=DegenerateOutputCheck,
        needs=("probabilities",),
        summary="the most-predicted class is at most this share of held-out rows",
    )
)
