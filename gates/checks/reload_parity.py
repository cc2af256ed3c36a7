"""state_dict -> bytes -> ``torch.load(weights_only=True)`` -> rebuilt model: same outputs.

Name: ``reload_parity``. Tasks: all. Needs: model, rebuild, rows.

Threshold: ``max_abs_diff``, the largest acceptable absolute difference between the
outputs of the model and its reloaded copy (default 0: bit-identical).
"""

from __future__ import annotations

import io
from collections.abc import Callable
from typing import TYPE_CHECKING

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


class ReloadParityCheck(CheckSettings):
    max_abs_diff: float = Field(0.0, ge=0.0)


def check_reload_parity(
    model: nn.Module,
    rebuild: Callable[[], nn.Module],
    rows: np.ndarray,
    settings: ReloadParityCheck,
) -> CheckResult:
    """state_dict → bytes → ``torch.load(weights_only=True)`` → rebuilt model: same outputs."""
    import torch  # when the check runs: see _outputs.torch_outputs

    def run() -> CheckResult:
        model.eval()
        buffer = io.BytesIO()
        torch.save(model.state_dict(), buffer)
        buffer.seek(0)
        try:
            reloaded = rebuild()
            reloaded.load_state_dict(torch.load(buffer, weights_only=True))
            reloaded.eval()
        except Exception as exc:
            return CheckResult(
                "reload_parity",
                False,
                "reload failed",
                f"<= {settings.max_abs_diff:g}",
                f"state dict did not reload with weights_only=True: {exc}",
            )
        diff = largest_abs_diff(torch_outputs(model, rows), torch_outputs(reloaded, rows))
        ok = diff <= settings.max_abs_diff
        return CheckResult(
            "reload_parity",
            ok,
            f"max |diff| {diff:.3g}",
            f"<= {settings.max_abs_diff:g}",
            "" if ok else "reloaded weights give different outputs",
        )

    return timed(run)


def _run(inputs: GateInputs, settings: ReloadParityCheck) -> CheckResult:
    return check_reload_parity(inputs.model, inputs.rebuild, inputs.rows, settings)


register(
    GateCheck(
        name="reload_parity",
        run=_run,
        applies_to=TASKS,
        settings=ReloadParityCheck,
        needs=("model", "rebuild", "rows"),
        summary="the state dict reloads with weights_only=True and gives the same outputs",
    )
)
