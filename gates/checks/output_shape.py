"""The registered model returns the task's output shape.

Name: ``output_shape``. Tasks: all. Needs: predict, rows, n_outputs. Settings: only
``enabled``.

Binary and regression models return one value per row, ``(n,)`` (``(n, 1)`` is read as
that); a multiclass model one probability per class, ``(n, n_outputs)``. A module from
``model.factory`` with the wrong number of outputs fails here, naming the shapes,
instead of crashing the checks that read its outputs.
"""

from __future__ import annotations

import numpy as np

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


class OutputShapeCheck(CheckSettings):
    """Only ``enabled``: the expected shape follows from the task and its classes."""


def expected_output_shape(task: str, rows: int, n_outputs: int) -> tuple[int, ...]:
    return (rows, n_outputs) if task == "multiclass" else (rows,)


def check_output_shape(
    predict: Predict, rows: np.ndarray, n_outputs: int, task: str
) -> CheckResult:
    def run() -> CheckResult:
        sample = rows[: min(len(rows), 8)].astype(np.float32)
        want = expected_output_shape(task, len(sample), n_outputs)
        try:
            shape = tuple(np.shape(predict(sample)))
        except Exception as exc:
            return CheckResult(
                "output_shape", False, "raised", str(want), f"predict raised {exc!r}"
            )
        if task != "multiclass" and len(shape) == 2 and shape[1] == 1:
            shape = shape[:1]
        ok = shape == want
        return CheckResult(
            "output_shape",
            ok,
            str(shape),
            str(want),
            "" if ok else f"a {task} model must return {want} for {len(sample)} rows, got {shape}",
        )

    return timed(run)


def _run(inputs: GateInputs, settings: OutputShapeCheck) -> CheckResult:
    return check_output_shape(inputs.predict, inputs.rows, inputs.n_outputs, inputs.task)


register(
    GateCheck(
        name="output_shape",
        run=_run,
        settings=OutputShapeCheck,
        needs=("predict", "rows", "n_outputs"),
        applies_to=TASKS,
        summary="the output is (n,) for binary and regression, (n, classes) for multiclass",
    )
)
