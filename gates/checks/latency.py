"""p50 and p95 wall time of the registered model's predict at each batch size.

Name: ``latency``; one result per batch size, ``latency_batch_N``. Tasks: all.
Needs: predict, rows.

Thresholds: ``p50_ms`` and ``p95_ms``, the largest acceptable milliseconds per call,
over ``repeats`` calls after one warm-up call.
"""

from __future__ import annotations

import time

import numpy as np
from pydantic import Field, field_validator

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


class LatencyCheck(CheckSettings):
    batch_sizes: list[int] = Field(default=[1, 1024], min_length=1)
    repeats: int = Field(30, ge=5)
    p50_ms: float = Field(200.0, gt=0.0)
    p95_ms: float = Field(2000.0, gt=0.0, description="the field's rule: answer within 2 s")

    @field_validator("batch_sizes")
    @classmethod
    def _positive(cls, sizes: list[int]) -> list[int]:
        if any(size < 1 for size in sizes):
            raise ValueError("batch sizes must be >= 1")
        return sizes


def check_latency(predict: Predict, rows: np.ndarray, settings: LatencyCheck) -> list[CheckResult]:
    """p50 and p95 wall time of ``predict`` at each configured batch size."""
    results = []
    for batch_size in settings.batch_sizes:
        repeats = np.resize(rows, (batch_size, rows.shape[1])).astype(np.float32)

        def run(batch: np.ndarray = repeats, size: int = batch_size) -> CheckResult:
            name = f"latency_batch_{size}"
            predict(batch)  # warm-up: first calls pay for lazy initialisation
            timings = []
            for _ in range(settings.repeats):
                started = time.perf_counter()
                predict(batch)
                timings.append((time.perf_counter() - started) * 1000)
            p50, p95 = np.percentile(timings, [50, 95])
            ok = p50 <= settings.p50_ms and p95 <= settings.p95_ms
            limits = f"{settings.p50_ms:g} / {settings.p95_ms:g} ms"
            message = "" if ok else f"p50 {p50:.1f} ms / p95 {p95:.1f} ms exceed {limits}"
            return CheckResult(
                name,
                ok,
                f"p50 {p50:.2f} ms, p95 {p95:.2f} ms",
                f"p50 <= {settings.p50_ms:g} ms, p95 <= {settings.p95_ms:g} ms",
                message,
            )

        results.append(timed(run))
    return results


def _run(inputs: GateInputs, settings: LatencyCheck) -> list[CheckResult]:
    return check_latency(inputs.predict, inputs.rows, settings)


register(
    GateCheck(
        name="latency",
        run=_run,
        applies_to=TASKS,
        settings=LatencyCheck,
        needs=("predict", "rows"),
        summary="p50/p95 of predict at each batch size",
    )
)
