"""Peak memory growth of one predict call on ``batch_size`` rows.

Name: ``memory``; the result is ``memory_batch_N``. Tasks: all. Needs: predict, rows.

Threshold: ``max_peak_mb``, the largest acceptable growth in MB (peak RSS on Linux,
tracemalloc elsewhere, said so in the observed value).
"""

from __future__ import annotations

import tracemalloc
from pathlib import Path

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


class MemoryCheck(CheckSettings):
    batch_size: int = Field(10_000, ge=1)
    max_peak_mb: float = Field(512.0, gt=0.0, description="peak RSS growth during inference")


def _status_kb(field: str) -> int | None:
    """A ``VmHWM`` / ``VmRSS`` line of ``/proc/self/status`` in kB (None off Linux)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(f"{field}:"):
                return int(line.split()[1])
    except OSError:
        return None
    return None


def _reset_peak_rss() -> bool:
    # Linux: writing 5 to clear_refs resets VmHWM (the peak RSS) to the current RSS,
    # so the next reading is the peak of what runs in between.
    try:
        Path("/proc/self/clear_refs").write_text("5")
        return True
    except OSError:
        return False


def check_memory(predict: Predict, rows: np.ndarray, settings: MemoryCheck) -> CheckResult:
    """Peak memory growth of one ``predict`` call on ``settings.batch_size`` rows.

    Measured as peak RSS minus RSS before the call (Linux ``VmHWM`` after resetting it),
    which sees torch's native allocations; elsewhere falls back to tracemalloc (Python
    allocations only, said so in the observed value).
    """

    def run() -> CheckResult:
        batch = np.resize(rows, (settings.batch_size, rows.shape[1])).astype(np.float32)
        predict(batch[:8])  # load lazily-initialised kernels before measuring
        if _reset_peak_rss() and (before := _status_kb("VmRSS")) is not None:
            predict(batch)
            peak_mb = ((_status_kb("VmHWM") or before) - before) / 1024
            method = "peak RSS growth"
        else:
            tracemalloc.start()
            predict(batch)
            peak_mb = tracemalloc.get_traced_memory()[1] / 2**20
            tracemalloc.stop()
            method = "tracemalloc peak"
        ok = peak_mb <= settings.max_peak_mb
        return CheckResult(
            f"memory_batch_{settings.batch_size}",
            ok,
            f"{peak_mb:.1f} MB ({method})",
            f"<= {settings.max_peak_mb:g} MB",
            ""
            if ok
            else f"inference on {settings.batch_size} rows grew memory by {peak_mb:.1f} MB",
        )

    return timed(run)


def _run(inputs: GateInputs, settings: MemoryCheck) -> CheckResult:
    return check_memory(inputs.predict, inputs.rows, settings)


register(
    GateCheck(
        name="memory",
        run=_run,
        applies_to=TASKS,
        settings=MemoryCheck,
        needs=("predict", "rows"),
        summary="peak RSS growth of one predict on N rows",
    )
)
