"""Model checks practitioners keep forgetting, as plain functions over a model.

Each check returns a :class:`~gates.result.CheckResult` and never raises for a bad
model: an exception inside the model is itself a failed check with the reason. Models
are passed as ``predict`` callables (float32 matrix -> probabilities) where the check
is about behaviour, and as ``torch.nn.Module`` where it is about serialisation.
"""

from __future__ import annotations

import io
import math
import re
import time
import tracemalloc
from collections.abc import Callable, Mapping
from pathlib import Path

import numpy as np
import torch
from driftgate.gates.config import (
    DegenerateOutputCheck,
    EnvironmentCheck,
    ExportParityCheck,
    FiniteOutputsCheck,
    LatencyCheck,
    MemoryCheck,
    OverfittingCheck,
    ReloadParityCheck,
)
from driftgate.gates.result import CheckResult, fmt
from torch import nn

Predict = Callable[[np.ndarray], np.ndarray]


def _timed(check: Callable[[], CheckResult]) -> CheckResult:
    started = time.perf_counter()
    result = check()
    return CheckResult(**{**result.__dict__, "seconds": time.perf_counter() - started})


def _as_probabilities(output) -> np.ndarray:
    return np.asarray(output, dtype=np.float64).ravel()


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


def check_finite_outputs(
    predict: Predict,
    valid_rows: np.ndarray,
    lower: np.ndarray,
    upper: np.ndarray,
    settings: FiniteOutputsCheck,
) -> CheckResult:
    """No NaN/Inf/out-of-[0,1] probability on contract-valid rows, bounds included."""

    def run() -> CheckResult:
        rows = np.vstack(
            [valid_rows.astype(np.float32), edge_rows(lower, upper, settings.edge_samples)]
        )
        try:
            output = _as_probabilities(predict(rows))
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
        bad = ~np.isfinite(output) | (output < 0) | (output > 1)
        n_bad = int(bad.sum())
        message = ""
        if n_bad:
            first = int(np.flatnonzero(bad)[0])
            where = (
                "an edge row at the contract bounds"
                if first >= len(valid_rows)
                else "a held-out row"
            )
            message = (
                f"{n_bad} of {len(rows)} outputs are NaN/Inf or outside [0, 1]; "
                f"first: {output[first]} on {where}"
            )
        return CheckResult(
            "finite_outputs", n_bad == 0, f"{n_bad} bad of {len(rows)}", "0 bad rows", message
        )

    return _timed(run)


def check_signature(
    signature_inputs: list[dict] | None, predict: Predict, n_features: int
) -> CheckResult:
    """The logged signature declares float32 ``(-1, n_features)`` and rejects a wrong width."""

    def run() -> CheckResult:
        if not signature_inputs:
            return CheckResult(
                "signature",
                False,
                "none",
                f"float32 (-1, {n_features})",
                "the model was logged without an input signature",
            )
        spec = signature_inputs[0].get("tensor-spec", {})
        dtype, shape = spec.get("dtype"), tuple(spec.get("shape", ()))
        observed = f"{dtype} {shape}"
        expected = f"float32 (-1, {n_features})"
        if dtype != "float32" or shape != (-1, n_features):
            return CheckResult(
                "signature",
                False,
                observed,
                expected,
                "signature does not match the model's feature contract",
            )
        try:
            predict(np.zeros((2, n_features + 1), dtype=np.float32))
        except Exception:
            return CheckResult("signature", True, observed + ", wrong width rejected", expected)
        return CheckResult(
            "signature",
            False,
            observed + ", wrong width accepted",
            expected,
            f"a ({2}, {n_features + 1}) input was accepted; the signature is not enforced",
        )

    return _timed(run)


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
        predicted_positive = float((probabilities_ >= 0.5).mean())
        share = max(predicted_positive, 1 - predicted_positive)
        majority = "1" if predicted_positive >= 0.5 else "0"
        ok = share <= settings.max_single_class_share
        return CheckResult(
            "degenerate_output",
            ok,
            f"{share:.2%} class {majority}",
            f"<= {settings.max_single_class_share:.2%}",
            "" if ok else f"class {majority} predicted for {share:.2%} of held-out rows",
        )

    return _timed(run)


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

        results.append(_timed(run))
    return results


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

    return _timed(run)


def _torch_outputs(model: Callable, rows: np.ndarray) -> np.ndarray:
    with torch.no_grad():
        return _as_probabilities(model(torch.as_tensor(rows, dtype=torch.float32)))


def _max_abs_diff(a: np.ndarray, b: np.ndarray) -> float:
    if a.shape != b.shape:
        return math.inf
    both_nan = np.isnan(a) & np.isnan(b)
    diff = np.abs(a - b)
    diff[both_nan] = 0.0
    return float(np.nan_to_num(diff, nan=math.inf).max(initial=0.0))


def check_reload_parity(
    model: nn.Module,
    rebuild: Callable[[], nn.Module],
    rows: np.ndarray,
    settings: ReloadParityCheck,
) -> CheckResult:
    """state_dict → bytes → ``torch.load(weights_only=True)`` → rebuilt model: same outputs."""

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
        diff = _max_abs_diff(_torch_outputs(model, rows), _torch_outputs(reloaded, rows))
        ok = diff <= settings.max_abs_diff
        return CheckResult(
            "reload_parity",
            ok,
            f"max |diff| {diff:.3g}",
            f"<= {settings.max_abs_diff:g}",
            "" if ok else "reloaded weights give different outputs",
        )

    return _timed(run)


def check_export_parity(
    model: nn.Module, rows: np.ndarray, settings: ExportParityCheck
) -> CheckResult:
    """The exported model (TorchScript trace or torch.export) matches eager outputs.

    Tracing records one path through the code: a model with data-dependent control flow
    exports fine on the example and diverges on other rows, which is what this catches.
    """

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
        diff = _max_abs_diff(_torch_outputs(model, rows), _torch_outputs(exported, rows))
        ok = diff <= settings.max_abs_diff
        return CheckResult(
            name,
            ok,
            f"max |diff| {diff:.3g}",
            threshold,
            "" if ok else f"{settings.format} export diverges from the eager model",
        )

    return _timed(run)


def check_registry_parity(
    registry_predict: Predict, model: nn.Module, rows: np.ndarray, max_abs_diff: float
) -> CheckResult:
    """The registered MLflow model (what serving loads) matches the logged weights."""

    def run() -> CheckResult:
        try:
            served = _as_probabilities(registry_predict(rows.astype(np.float32)))
        except Exception as exc:
            return CheckResult(
                "registry_parity", False, "predict raised", f"<= {max_abs_diff:g}", repr(exc)
            )
        diff = _max_abs_diff(served, _torch_outputs(model, rows))
        ok = diff <= max_abs_diff
        return CheckResult(
            "registry_parity",
            ok,
            f"max |diff| {diff:.3g}",
            f"<= {max_abs_diff:g}",
            "" if ok else "the registered model and its logged weights disagree",
        )

    return _timed(run)


def check_overfitting(
    train_metrics: Mapping[str, float], val_metrics: Mapping[str, float], settings: OverfittingCheck
) -> CheckResult:
    def run() -> CheckResult:
        train, val = train_metrics.get(settings.metric), val_metrics.get(settings.metric)
        if train is None or val is None or math.isnan(train) or math.isnan(val):
            return CheckResult(
                "overfitting",
                False,
                "missing",
                f"<= {settings.max_gap:g}",
                f"train/val {settings.metric} not recorded on the training run",
            )
        gap = abs(train - val)
        ok = gap <= settings.max_gap
        return CheckResult(
            f"overfitting_{settings.metric}",
            ok,
            f"gap {gap:.4f} (train {fmt(train)}, val {fmt(val)})",
            f"<= {settings.max_gap:g}",
            "" if ok else f"train/validation {settings.metric} gap {gap:.4f} suggests overfitting",
        )

    return _timed(run)


_LEVELS = {"major": 1, "minor": 2, "patch": 3}


def _release(version: str, parts: int) -> tuple[str, ...]:
    numbers = re.findall(r"\d+", version.split("+")[0])
    return tuple(numbers[:parts])


def check_environment(
    recorded: Mapping[str, str], current: Mapping[str, str], settings: EnvironmentCheck
) -> CheckResult:
    """The versions recorded at training match the serving environment at ``level``."""

    def run() -> CheckResult:
        parts = _LEVELS[settings.level]
        mismatches, observed = [], []
        for package in settings.require_same:
            built, here = recorded.get(package), current.get(package)
            observed.append(f"{package} {built or '?'} vs {here or '?'}")
            if built is None:
                mismatches.append(f"{package} version was not recorded at training")
            elif here is None or _release(built, parts) != _release(here, parts):
                mismatches.append(f"{package} {built} (trained) vs {here} (here)")
        ok = not mismatches
        return CheckResult(
            "environment",
            ok,
            "; ".join(observed),
            f"same {settings.level} release",
            "; ".join(mismatches),
        )

    return _timed(run)
