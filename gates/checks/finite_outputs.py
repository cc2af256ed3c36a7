"""No NaN, Inf or out-of-range output on contract-valid rows, bounds included.

The range follows the task: a binary P(class 1) in [0, 1]; multiclass probabilities in
[0, 1] that sum to 1 per row (within 1e-4); a regression value only finite.

Name: ``finite_outputs``. Tasks: all. Needs: predict, rows, lower, upper.

The held-out rows plus edge rows at the contract's bounds (all-low, all-high, each
feature alone at each bound, ``edge_samples`` random corners): a model can be finite
inside the data and NaN at a bound it never saw. Threshold: 0 bad rows.
"""

from __future__ import annotations

import numpy as np
from pydantic import Field

from driftgate.gates.checks.registry import (
    CheckSettings,
    GateCheck,
    GateInputs,
    Predict,
    register,
    timed,
)
from driftgate.gates.result import CheckResult
from driftgate.training.features import TASKS


class FiniteOutputsCheck(CheckSettings):
    edge_samples: int = Field(
        256, ge=1, description="random rows with every feature at a contract bound"
    )


def edge_rows(lower: np.ndarray, upper: np.ndarray, samples: int, seed: int = 0) -> np.ndarray:
    """Rows at the contract's bounds: all-low, all-high, each feature alone at each
    bound (others at the midpoint), and ``samples`` random low/high combinations."""
    lower, upper = np.asarray(lower, np.float64), np.asarray(upper, np.float64)
    middle = (lower + upper) / 2
    rows = [lower, upper]
    for index in range(len(lower)):
        for bound in (lower, upper):
            row = middle.copy()
            row[index] = bound[index]
            rows.append(row)
    pick_high = np.random.default_rng(seed).random((samples, len(lower))) < 0.5
    rows.extend(np.where(pick_high, upper, lower))
    return np.asarray(rows, dtype=np.float32)


# How far a row of class probabilities may sum from 1 (float32 softmax rounding).
SUM_TOLERANCE = 1e-4
RANGE_WORDS = {
    "binary": "outside [0, 1]",
    "multiclass": "outside [0, 1] or rows not summing to 1",
    "regression": "",
}


def bad_outputs(output: np.ndarray, task: str) -> np.ndarray:
    """Per row: its output is NaN/Inf or out of the task's range."""
    if task == "multiclass":
        rows = output.reshape(len(output), -1)
        finite = np.isfinite(rows).all(axis=1)
        in_range = ((rows >= 0) & (rows <= 1)).all(axis=1)
        sums = np.abs(np.nan_to_num(rows).sum(axis=1) - 1) <= SUM_TOLERANCE
        return ~(finite & in_range & sums)
    bad = ~np.isfinite(output)
    if task == "binary":
        bad |= (output < 0) | (output > 1)
    return bad


def check_finite_outputs(
    predict: Predict,
    valid_rows: np.ndarray,
    lower: np.ndarray,
    upper: np.ndarray,
    settings: FiniteOutputsCheck,
    task: str = "binary",
) -> CheckResult:
    """No NaN/Inf/out-of-range output on contract-valid rows, bounds included."""

    def run() -> CheckResult:
        rows = np.vstack(
            [valid_rows.astype(np.float32), edge_rows(lower, upper, settings.edge_samples)]
        )
        try:
            output = np.asarray(predict(rows), dtype=np.float64)
            output = output.reshape(len(output), -1) if task == "multiclass" else output.ravel()
        except Exception as exc:
            return CheckResult(
                "finite_outputs", False, "raised", "0 bad rows", f"predict raised {exc!r}"
            )
        if len(output) != len(rows):
            return CheckResult(
                "finite_outputs",
                False,
                f"{len(output)} outputs",
                f"{len(rows)} outputs",
                "model returned a different number of outputs than rows",
            )
        bad = bad_outputs(output, task)
        n_bad = int(bad.sum())
        message = ""
        if n_bad:
            first = int(np.flatnonzero(bad)[0])
            where = (
                "an edge row at the contract bounds"
                if first >= len(valid_rows)
                else "a held-out row"
            )
            words = " or ".join(w for w in ("NaN/Inf", RANGE_WORDS[task]) if w)
            message = (
                f"{n_bad} of {len(rows)} outputs are {words}; first: {output[first]} on {where}"
            )
        return CheckResult(
            "finite_outputs", n_bad == 0, f"{n_bad} bad of {len(rows)}", "0 bad rows", message
        )

    return timed(run)


def _run(inputs: GateInputs, settings: FiniteOutputsCheck) -> CheckResult:
    return check_finite_outputs(
        inputs.predict, inputs.rows, inputs.lower, inputs.upper, settings, inputs.task
    )


register(
    GateCheck(
        name="finite_outputs",
        run=_run,
        applies_to=TASKS,
        settings=FiniteOutputsCheck,
        needs=("predict", "rows", "lower", "upper"),
        summary="no NaN/Inf/out-of-range output (per task) on held-out rows and at the bounds",
    )
)
