"""Model checks on small hand-built models: each check can fail, and says why."""

import numpy as np
import pytest
import torch
from torch import nn

from driftgate.gates.checks.degenerate_output import (
    DegenerateOutputCheck,
    check_degenerate_output,
)
from driftgate.gates.checks.environment import EnvironmentCheck, check_environment
from driftgate.gates.checks.export_parity import ExportParityCheck, check_export_parity
from driftgate.gates.checks.finite_outputs import (
    FiniteOutputsCheck,
    check_finite_outputs,
    edge_rows,
)
from driftgate.gates.checks.latency import LatencyCheck, check_latency
from driftgate.gates.checks.memory import MemoryCheck, check_memory
from driftgate.gates.checks.overfitting import OverfittingCheck, check_overfitting
from driftgate.gates.checks.reload_parity import ReloadParityCheck, check_reload_parity
from driftgate.gates.checks.signature import check_signature
from driftgate.training.model import Standardization, TabularClassifier, predict_proba

N_FEATURES = 3
ROWS = np.random.default_rng(0).normal(size=(200, N_FEATURES)).astype(np.float32)
LOWER, UPPER = ROWS.min(axis=0), ROWS.max(axis=0)


def small_model() -> TabularClassifier:
    torch.manual_seed(0)
    return TabularClassifier(N_FEATURES, [8], 0.0, Standardization.fit(ROWS)).eval()


class NaNAtUpperBound(nn.Module):
    """Finite inside the data, NaN where feature 0 reaches the contract's upper bound."""

    def __init__(self, inner: nn.Module, limit: float) -> None:
        super().__init__()
        self.inner, self.limit = inner, limit

    def forward(self, x):
        out = self.inner(x)
        return torch.where(x[:, 0] >= self.limit, torch.full_like(out, float("nan")), out)


class BranchesOnData(nn.Module):
    """Data-dependent control flow: a trace records one branch and diverges on the other."""

    def __init__(self, inner: nn.Module) -> None:
        super().__init__()
        self.inner = inner

    def forward(self, x):
        if x.sum() > 0:
            return self.inner(x)
        return 1 - self.inner(x)


def predictor(model):
    return lambda rows: predict_proba(model, rows)


def test_finite_outputs_passes_a_sound_model():
    result = check_finite_outputs(
        predictor(small_model()), ROWS, LOWER, UPPER, FiniteOutputsCheck()
    )
    assert result.passed, result.message
    assert result.observed.startswith("0 bad of")


def test_finite_outputs_fails_a_model_that_is_nan_only_at_the_bounds():
    model = NaNAtUpperBound(small_model(), limit=float(UPPER[0]))
    valid = ROWS[ROWS[:, 0] < UPPER[0]]
    assert np.isfinite(predict_proba(model, valid)).all()  # held-out rows alone look fine
    result = check_finite_outputs(predictor(model), valid, LOWER, UPPER, FiniteOutputsCheck())
    assert not result.passed
    assert "edge row at the contract bounds" in result.message


def test_finite_outputs_reports_a_model_that_raises():
    def broken(rows):
        raise RuntimeError("boom")

    result = check_finite_outputs(broken, ROWS, LOWER, UPPER, FiniteOutputsCheck())
    assert not result.passed and "boom" in result.message


def test_edge_rows_hit_every_bound_of_every_feature():
    rows = edge_rows(LOWER, UPPER, samples=16)
    for index in range(N_FEATURES):
        assert (rows[:, index] == LOWER[index]).any() and (rows[:, index] == UPPER[index]).any()


def test_export_parity_passes_the_real_model_in_both_torch_formats():
    for fmt in ("torchscript", "torch_export"):
        [result] = check_export_parity(small_model(), ROWS, ExportParityCheck(format=fmt))
        assert result.passed, result.message
        assert result.name == f"export_parity_{fmt}"


def test_export_parity_fails_a_model_whose_trace_diverges():
    model = BranchesOnData(small_model()).eval()
    rows = np.vstack([np.abs(ROWS[:64]), -np.abs(ROWS[64:])])  # example batch sums > 0
    [result] = check_export_parity(model, rows, ExportParityCheck(format="torchscript"))
    assert not result.passed
    assert "diverges" in result.message


def test_reload_parity_passes_and_catches_an_architecture_mismatch():
    model = small_model()
    ok = check_reload_parity(
        model, lambda: TabularClassifier(N_FEATURES, [8], 0.0), ROWS, ReloadParityCheck()
    )
    assert ok.passed and ok.observed == "max |diff| 0"
    wrong = check_reload_parity(
        model, lambda: TabularClassifier(N_FEATURES, [4], 0.0), ROWS, ReloadParityCheck()
    )
    assert not wrong.passed and "weights_only=True" in wrong.message


def test_degenerate_output():
    assert check_degenerate_output(np.r_[np.zeros(90), np.ones(10)], DegenerateOutputCheck()).passed
    result = check_degenerate_output(np.r_[np.zeros(99), np.ones(1)], DegenerateOutputCheck())
    assert not result.passed and "class 0 predicted for 99.00%" in result.message


def test_latency_reports_each_batch_size_and_fails_an_impossible_budget():
    results = check_latency(
        predictor(small_model()), ROWS, LatencyCheck(batch_sizes=[1, 64], repeats=5)
    )
    assert [r.name for r in results] == ["latency_batch_1", "latency_batch_64"]
    assert all(r.passed for r in results)
    (too_slow,) = check_latency(
        predictor(small_model()), ROWS, LatencyCheck(batch_sizes=[64], repeats=5, p50_ms=1e-9)
    )
    assert not too_slow.passed and "exceed" in too_slow.message


def test_memory_check_measures_a_large_allocation():
    def hungry(rows):
        block = np.ones((len(rows), 4096))  # 8 * 4096 bytes per row
        return block[:, 0] * 0.5

    result = check_memory(hungry, ROWS, MemoryCheck(batch_size=10_000, max_peak_mb=100))
    assert not result.passed  # about 312 MB
    assert float(result.observed.split()[0]) > 250


def test_overfitting_gap():
    settings = OverfittingCheck(metric="roc_auc", max_gap=0.05)
    assert check_overfitting({"roc_auc": 0.9}, {"roc_auc": 0.87}, settings).passed
    result = check_overfitting({"roc_auc": 0.99}, {"roc_auc": 0.8}, settings)
    assert not result.passed and "gap 0.1900" in result.observed
    assert not check_overfitting({}, {"roc_auc": 0.8}, settings).passed


@pytest.mark.parametrize(
    ("recorded", "passed"),
    [
        ({"python": "3.11.2", "torch": "2.13.0+cpu"}, True),
        ({"python": "3.12.1", "torch": "2.13.0"}, False),
        ({"python": "3.11.7"}, False),
    ],
)
def test_environment_compares_minor_releases(recorded, passed):
    current = {"python": "3.11.7", "torch": "2.13.1"}
    result = check_environment(recorded, current, EnvironmentCheck())
    assert result.passed is passed


@pytest.mark.parametrize("model_format", ["onnx", "logistic_json"])
def test_environment_skips_torch_for_any_format_torch_does_not_run(model_format):
    """``adopt`` records ``model_format`` only for a format torch does not run (its
    ``runs_on_torch``): any such format, not ONNX by name, has no torch to compare;
    python is still compared (control: a python mismatch still fails)."""
    current = {"python": "3.11.7", "torch": "2.13.1"}
    recorded = {"python": "3.11.2", "model_format": model_format}
    result = check_environment(recorded, current, EnvironmentCheck())
    assert result.passed, result.reason
    assert f"torch not applicable ({model_format}: not run by torch)" in result.observed
    assert not check_environment(
        {**recorded, "python": "3.12.0"}, current, EnvironmentCheck()
    ).passed


def test_signature_must_match_and_be_enforced():
    spec = [{"type": "tensor", "tensor-spec": {"dtype": "float32", "shape": (-1, N_FEATURES)}}]

    def strict(rows):
        if rows.shape[1] != N_FEATURES:
            raise ValueError("wrong width")
        return np.zeros(len(rows))

    assert check_signature(spec, strict, N_FEATURES).passed
    assert not check_signature(spec, lambda rows: np.zeros(len(rows)), N_FEATURES).passed
    assert not check_signature(None, strict, N_FEATURES).passed
    wrong_dtype = [
        {"type": "tensor", "tensor-spec": {"dtype": "float64", "shape": (-1, N_FEATURES)}}
    ]
    assert not check_signature(wrong_dtype, strict, N_FEATURES).passed
