"""The exported model (TorchScript trace, torch.export or ONNX) matches eager outputs.

Name: ``export_parity``; one result per format, ``export_parity_<format>``. Tasks: all.
Needs: model, rows, lower, upper.

Settings: ``format`` (one of ``torchscript``, ``torch_export``, ``onnx``; default
``torchscript``) or ``formats`` (a list of them, checked in order; not both), and
``max_abs_diff``, the largest acceptable absolute difference between eager and exported
outputs (default 1e-5).

The outputs are compared on the held-out rows, rows at the contract's bounds and rows
with one missing value per feature (the model imputes them itself), in one batch and
one row at a time (what the service sends): output shape, dtype and max |diff|.

``onnx`` exports through the model's flavour (``torch.onnx.export(..., dynamo=True)``,
dynamic batch dimension) and runs the file in ONNX Runtime; the result records the
opset and the onnx / onnxruntime versions. With :attr:`GateInputs.export_dir` set (the
gate job sets it), the file is written there as ``model.onnx`` and named in the result's
``artifacts``: the gate logs it on the version's run (``exports/model.onnx``), where the
service's ``onnxruntime`` backend reads it.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import numpy as np
from pydantic import Field, model_validator

from driftgate.gates.checks._outputs import largest_abs_diff
from driftgate.gates.checks.finite_outputs import edge_rows
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
    from collections.abc import Callable

    from torch import nn

ExportFormat = Literal["torchscript", "torch_export", "onnx"]
ONNX_FILE = "model.onnx"
# Rows scored one at a time as well as in the batch: a module that special-cases a
# batch of one (the service's usual request) exports one branch only.
SINGLE_ROWS = 8
EDGE_SAMPLES = 32


class ExportParityCheck(CheckSettings):
    format: ExportFormat = "torchscript"
    formats: tuple[ExportFormat, ...] | None = Field(
        None, min_length=1, description="several formats, checked in order (instead of format)"
    )
    max_abs_diff: float = Field(1e-5, ge=0.0)

    @model_validator(mode="after")
    def _format_or_formats(self) -> ExportParityCheck:
        if self.formats is not None and "format" in self.model_fields_set:
            raise ValueError("give format or formats, not both")
        if self.formats is not None and len(set(self.formats)) != len(self.formats):
            raise ValueError(f"formats lists a format twice: {list(self.formats)}")
        return self

    @property
    def selected(self) -> tuple[ExportFormat, ...]:
        """The formats to check, in order."""
        return self.formats or (self.format,)


def comparison_rows(rows: np.ndarray, lower: np.ndarray, upper: np.ndarray) -> np.ndarray:
    """Held-out rows, contract-edge rows, and one row per feature with that feature missing."""
    rows = np.asarray(rows, dtype=np.float32)
    missing = np.repeat(rows[:1] if len(rows) else edge_rows(lower, upper, 1)[:1], rows.shape[1], 0)
    missing[np.arange(rows.shape[1]), np.arange(rows.shape[1])] = np.nan
    return np.concatenate([rows, edge_rows(lower, upper, EDGE_SAMPLES), missing]).astype(np.float32)


def check_export_parity(
    model: nn.Module,
    rows: np.ndarray,
    settings: ExportParityCheck,
    lower: np.ndarray | None = None,
    upper: np.ndarray | None = None,
    export_dir: Path | None = None,
) -> list[CheckResult]:
    """One result per configured format: the exported model matches eager outputs.

    Tracing records one path through the code: a model with data-dependent control flow
    exports fine on the example and diverges on other rows, which is what this catches.
    """
    if lower is not None and upper is not None:
        rows = comparison_rows(rows, lower, upper)
    return [
        timed(lambda fmt=fmt: _check_format(model, rows, fmt, settings, export_dir))
        for fmt in settings.selected
    ]


def _check_format(
    model: nn.Module,
    rows: np.ndarray,
    fmt: ExportFormat,
    settings: ExportParityCheck,
    export_dir: Path | None,
) -> CheckResult:
    import torch  # when the check runs: see _outputs.torch_outputs

    name = f"export_parity_{fmt}"
    threshold = f"<= {settings.max_abs_diff:g}"
    model.eval()
    example = torch.as_tensor(rows[: min(len(rows), 64)], dtype=torch.float32)
    about, artifacts = "", ()
    try:
        if fmt == "onnx":
            exported, about, artifacts = _onnx(model, example.numpy(), export_dir)
        else:
            exported = _torch_export(model, example, fmt)
    except Exception as exc:
        reason = str(exc) if fmt == "onnx" else f"{fmt} export raised: {exc}"
        return CheckResult(name, False, "export failed", threshold, reason)

    def eager(matrix: np.ndarray) -> np.ndarray:
        with torch.no_grad():
            return model(torch.as_tensor(matrix, dtype=torch.float32)).numpy()

    problem, diff = _compare(eager, exported, rows)
    ok = not problem and diff <= settings.max_abs_diff
    observed = f"max |diff| {diff:.3g}" + (f" ({about})" if about else "")
    message = problem or ("" if ok else f"{fmt} export diverges from the eager model by {diff:.3g}")
    return CheckResult(name, ok, observed, threshold, message, artifacts=artifacts)


def _compare(
    eager: Callable[[np.ndarray], np.ndarray],
    exported: Callable[[np.ndarray], np.ndarray],
    rows: np.ndarray,
) -> tuple[str, float]:
    """Why the outputs differ in shape or dtype (or ''), and their largest |diff|, in one
    batch and row by row."""
    diff = 0.0
    batches = [rows] + [rows[i : i + 1] for i in range(min(SINGLE_ROWS, len(rows)))]
    for batch in batches:
        want, got = np.asarray(eager(batch)), np.asarray(exported(batch))
        if want.shape != got.shape or want.dtype != got.dtype:
            return (
                f"output {got.shape} {got.dtype} for {len(batch)} rows; the eager model "
                f"returns {want.shape} {want.dtype}",
                float("inf"),
            )
        diff = max(diff, largest_abs_diff(want.astype(np.float64), got.astype(np.float64)))
    return "", diff


def _torch_export(model: nn.Module, example, fmt: ExportFormat) -> Callable:
    import torch

    with torch.no_grad():
        if fmt == "torchscript":
            buffer = io.BytesIO()
            torch.jit.save(torch.jit.trace(model, example, check_trace=False), buffer)
            buffer.seek(0)
            exported = torch.jit.load(buffer)
        else:
            batch = torch.export.Dim("batch", min=1)
            program = torch.export.export(model, (example,), dynamic_shapes=({0: batch},))
            exported = program.module()

    def run(matrix: np.ndarray) -> np.ndarray:
        with torch.no_grad():
            return exported(torch.as_tensor(matrix, dtype=torch.float32)).numpy()

    return run


def _onnx(
    model: nn.Module, example: np.ndarray, export_dir: Path | None
) -> tuple[Callable, str, tuple[str, ...]]:
    """The ONNX Runtime call of the flavour's export, what it was made with, its file."""
    import onnx
    import onnxruntime

    from driftgate.training.flavour import flavour_of_module

    export = flavour_of_module(model).export_onnx(model, example)
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = options.inter_op_num_threads = 1
    session = onnxruntime.InferenceSession(export.data, options, providers=["CPUExecutionProvider"])
    artifacts: tuple[str, ...] = ()
    if export_dir is not None:
        export_dir.mkdir(parents=True, exist_ok=True)
        path = export_dir / ONNX_FILE
        path.write_bytes(export.data)
        artifacts = (str(path),)
    about = f"opset {export.opset}, onnx {onnx.__version__}, onnxruntime {onnxruntime.__version__}"

    def run(matrix: np.ndarray) -> np.ndarray:
        return session.run(None, {export.input_name: np.asarray(matrix, dtype=np.float32)})[0]

    return run, about, artifacts


def _run(inputs: GateInputs, settings: ExportParityCheck) -> list[CheckResult]:
    return check_export_parity(
        inputs.model, inputs.rows, settings, inputs.lower, inputs.upper, inputs.export_dir
    )


register(
    GateCheck(
        name="export_parity",
        run=_run,
        applies_to=TASKS,
        settings=ExportParityCheck,
        needs=("model", "rows", "lower", "upper"),
        summary="the TorchScript, torch.export or ONNX model matches eager outputs",
    )
)
