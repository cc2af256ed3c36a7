"""The registered MLflow model (what serving loads) matches the logged weights.

Name: ``registry_parity``. Tasks: all. Needs: predict, model, rows (and reads
``export_parity``'s settings).

Threshold: ``max_abs_diff``, the largest acceptable absolute difference; unset, the
registered model is held to the ``export_parity`` bar (default 1e-5).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
from pydantic import Field

from driftgate.gates.checks._outputs import as_probabilities, largest_abs_diff, torch_outputs
from driftgate.gates.checks.export_parity import ExportParityCheck
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

if TYPE_CHECKING:
    from torch import nn


class RegistryParityCheck(CheckSettings):
    max_abs_diff: float | None = Field(
        None, ge=0.0, description="unset: the export_parity check's max_abs_diff"
    )


def check_registry_parity(
    registry_predict: Predict, model: nn.Module, rows: np.ndarray, max_abs_diff: float
) -> CheckResult:
    """The registered MLflow model (what serving loads) matches the logged weights."""

    def run() -> CheckResult:
        try:
            served = as_probabilities(registry_predict(rows.astype(np.float32)))
        except Exception as exc:
            return CheckResult(
                "registry_parity", False, "predict raised", f"<= {max_abs_diff:g}", repr(exc)
            )
        diff = largest_abs_diff(served, torch_outputs(model, rows))
        ok = diff <= max_abs_diff
        return CheckResult(
            "registry_parity",
            ok,
            f"max |diff| {diff:.3g}",
            f"<= {max_abs_diff:g}",
            "" if ok else "the registered model and its logged weights disagree",
        )

    return timed(run)


def _run(inputs: GateInputs, settings: RegistryParityCheck) -> CheckResult:
    bar = settings.max_abs_diff
    if bar is None:
        bar = (inputs.settings.get("export_parity") or ExportParityCheck()).max_abs_diff
    return check_registry_parity(inputs.predict, inputs.model, inputs.rows, bar)


register(
    GateCheck(
        name="registry_parity",
        run=_run,
        applies_to=TASKS,
        settings=RegistryParityCheck,
        needs=("predict", "model", "rows"),
        summary="the registered model (what serving loads) matches the logged weights",
    )
)
