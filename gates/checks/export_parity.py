"""The exported model (TorchScript trace or torch.export) matches eager outputs.

Name: ``export_parity``; the result is ``export_parity_<format>``. Tasks: all.
Needs: model, rows.

Threshold: ``max_abs_diff``, the largest acceptable absolute difference between eager
and exported outputs (default 1e-5).
"""

from __future__ import annotations

import io
from typing import TYPE_CHECKING, Literal

import numpy as np
from pydantic import Field

from driftgate.gates.checks._outputs import largest_abs_diff, torch_outputs
from driftgate.gates.checks.registry import (
    CheckSettings,
    GateCheck,
    GateInputs,
    register,
    timed,
)
from driftgate.gates.result import CheckResult
from driftgate.training.features import TASKS

if TYPE_CHECKING:
    from torch import nn


class ExportParityCheck(CheckSettings):
    format: Literal["torchscript", "torch_export"] = "torchscript"
    max_abs_diff: float = Field(1e-5, ge=0.0)


def check_export_parity(
    model: nn.Module, rows: np.ndarray, settings: ExportParityCheck
) -> CheckResult:
    """The exported model (TorchScript trace or torch.export) matches eager outputs.

    Tracing records one path through the code: a model with data-dependent control flow
    exports fine on the example and diverges on other rows, which is what this catches.
    """
    import torch  # when the check runs: see _outputs.torch_outputs

    def run() -> CheckResult:
        model.eval()
        example = torch.as_tensor(rows[: min(len(rows), 64)], dtype=torch.float32)
        name = f"export_parity_{settings.format}"
        threshold = f"<= {settings.max_abs_diff:g}"
        try:
            with torch.no_grad():
                if settings.format == "torchscript":
                    exported = torch.jit.trace(model, example, check_trace=False)
                else:
                    batch = torch.export.Dim("batch", min=1)
                    program = torch.export.export(model, (example,), dynamic_shapes=({0: batch},))
                    exported = program.module()
                buffer = io.BytesIO()
                if settings.format == "torchscript":
                    torch.jit.save(exported, buffer)
                    buffer.seek(0)
                    exported = torch.jit.load(buffer)
        except Exception as exc:
            return CheckResult(
                name, False, "export failed", threshold, f"{settings.format} export raised: {exc}"
            )
        diff = largest_abs_diff(torch_outputs(model, rows), torch_outputs(exported, rows))
        ok = diff <= settings.max_abs_diff
        return CheckResult(
            name,
            ok,
            f"max |diff| {diff:.3g}",
            threshold,
            "" if ok else f"{settings.format} export diverges from the eager model",
        )

    return timed(run)


def _run(inputs: GateInputs, settings: ExportParityCheck) -> CheckResult:
    return check_export_parity(inputs.model, inputs.rows, settings)


register(
    GateCheck(
        name="export_parity",
        run=_run,
        applies_to=TASKS,
        settings=ExportParityCheck,
        needs=("model", "rows"),
        summary="the TorchScript or torch.export model matches eager outputs",
    )
)
