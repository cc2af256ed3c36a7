import math

import pytest

from driftgate.gates.config import MetricGate
from driftgate.gates.metrics import evaluate_metric_gate


def gate(**kwargs) -> MetricGate:
    return MetricGate(**{"metric": "roc_auc", "greater_is_better": True, **kwargs})


def test_absolute_threshold_in_both_directions():
    (passed,) = evaluate_metric_gate(gate(threshold=0.8), "test", {"roc_auc": 0.81}, None)
    (failed,) = evaluate_metric_gate(gate(threshold=0.8), "test", {"roc_auc": 0.79}, None)
    assert passed.passed and not failed.passed
    assert "0.7900 is below the threshold 0.8000" in failed.message
    lower = MetricGate(metric="log_loss", greater_is_better=False, threshold=0.5)
    (ok,) = evaluate_metric_gate(lower, "val", {"log_loss": 0.49}, None)
    (bad,) = evaluate_metric_gate(lower, "val", {"log_loss": 0.51}, None)
    assert ok.passed and not bad.passed and bad.name == "val_log_loss"


def test_champion_comparisons_are_skipped_without_a_champion():
    results = evaluate_metric_gate(gate(min_absolute_change=0.01), "test", {"roc_auc": 0.5}, None)
    assert results == []


def test_absolute_change_against_the_champion():
    g = gate(min_absolute_change=0.01)
    (ok,) = evaluate_metric_gate(g, "test", {"roc_auc": 0.851}, {"roc_auc": 0.84})
    (bad,) = evaluate_metric_gate(g, "test", {"roc_auc": 0.845}, {"roc_auc": 0.84})
    assert ok.passed and not bad.passed
    assert bad.observed.startswith("+0.0050")


def test_relative_change_when_lower_is_better():
    g = MetricGate(metric="log_loss", greater_is_better=False, min_relative_change=0.1)
    # 0.45 vs champion 0.5: 10% lower loss, exactly enough.
    (ok,) = evaluate_metric_gate(g, "test", {"log_loss": 0.45}, {"log_loss": 0.5})
    (bad,) = evaluate_metric_gate(g, "test", {"log_loss": 0.46}, {"log_loss": 0.5})
    assert ok.passed and not bad.passed
    assert "-0.0" not in ok.observed and ok.observed.startswith("+10.00%")


def test_negative_min_change_tolerates_a_small_regression():
    g = gate(min_absolute_change=-0.005)
    (ok,) = evaluate_metric_gate(g, "test", {"roc_auc": 0.837}, {"roc_auc": 0.84})
    (bad,) = evaluate_metric_gate(g, "test", {"roc_auc": 0.83}, {"roc_auc": 0.84})
    assert ok.passed and not bad.passed


def test_nan_metric_fails_with_a_reason():
    (result,) = evaluate_metric_gate(gate(threshold=0.5), "test", {"roc_auc": math.nan}, None)
    assert not result.passed and "NaN" in result.message


def test_a_gate_with_nothing_to_check_is_rejected():
    with pytest.raises(ValueError, match="at least one of"):
        MetricGate(metric="accuracy", greater_is_better=True)
