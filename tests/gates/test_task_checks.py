"""The model checks and the gate config per task (binary, multiclass, regression)."""

from __future__ import annotations

import numpy as np
import pytest

from driftgate.core.yamlconfig import ConfigError
from driftgate.gates.checks.degenerate_output import DegenerateOutputCheck, check_degenerate_output
from driftgate.gates.checks.finite_outputs import FiniteOutputsCheck, check_finite_outputs
from driftgate.gates.checks.output_shape import check_output_shape
from driftgate.gates.checks.overfitting import OverfittingCheck, check_overfitting
from driftgate.gates.config import GateConfig

ROWS = np.random.default_rng(0).normal(size=(20, 2)).astype(np.float32)
LOWER, UPPER = ROWS.min(axis=0), ROWS.max(axis=0)


def softmax(rows):
    z = np.column_stack([rows[:, 0], rows[:, 1], -rows[:, 0]])
    e = np.exp(z)
    return e / e.sum(axis=1, keepdims=True)


def finite(predict, task):
    return check_finite_outputs(
        predict, ROWS, LOWER, UPPER, FiniteOutputsCheck(edge_samples=8), task
    )


def test_finite_outputs_holds_each_task_to_its_range():
    assert finite(softmax, "multiclass").passed
    not_summing = finite(lambda r: softmax(r) * 0.9, "multiclass")
    assert not not_summing.passed and "rows not summing to 1" in not_summing.message
    # A regression value may be anything finite; the same values fail a binary model.
    assert finite(lambda r: 100 + 50 * r[:, 0], "regression").passed
    assert not finite(lambda r: 100 + 50 * r[:, 0], "binary").passed
    nan = finite(lambda r: np.where(r[:, 0] > 0, np.nan, 1.0), "regression")
    assert not nan.passed and nan.message.startswith(f"{nan.observed.split()[0]} of")


def test_degenerate_output_per_task():
    one_class = np.tile([0.1, 0.8, 0.1], (50, 1))
    result = check_degenerate_output(one_class, DegenerateOutputCheck(), "multiclass")
    assert not result.passed and result.observed == "100.00% class 1"
    assert check_degenerate_output(softmax(ROWS), DegenerateOutputCheck(), "multiclass").passed
    constant = check_degenerate_output(np.full(30, 151.0), DegenerateOutputCheck(), "regression")
    assert not constant.passed and "151" in constant.message
    spread = check_degenerate_output(
        np.linspace(50, 250, 30), DegenerateOutputCheck(), "regression"
    )
    assert spread.passed


def test_output_shape_names_the_expected_and_the_observed_shapes():
    assert check_output_shape(softmax, ROWS, 3, "multiclass").passed
    assert check_output_shape(lambda r: r[:, :1], ROWS, 1, "regression").passed  # (n, 1) is (n,)
    wrong = check_output_shape(lambda r: r, ROWS, 3, "multiclass")
    assert not wrong.passed
    assert (wrong.observed, wrong.threshold) == ("(8, 2)", "(8, 3)")
    assert wrong.message == "a multiclass model must return (8, 3) for 8 rows, got (8, 2)"


def test_overfitting_defaults_to_the_tasks_headline_metric():
    train, val = {"accuracy": 0.99, "r2": 0.9}, {"accuracy": 0.7, "r2": 0.85}
    multiclass = check_overfitting(train, val, OverfittingCheck(), "multiclass")
    assert multiclass.name == "overfitting_accuracy" and not multiclass.passed
    assert check_overfitting(train, val, OverfittingCheck(), "regression").name == "overfitting_r2"


def gates(metric: str, overfitting: str | None = None) -> GateConfig:
    checks = {"overfitting": {"metric": overfitting}} if overfitting else {}
    return GateConfig.model_validate(
        {
            "promotion": {
                "metrics": [{"metric": metric, "greater_is_better": True, "threshold": 0}]
            },
            "model_checks": checks,
        }
    )


def test_a_gate_on_a_metric_the_task_does_not_have_is_exit_2_naming_the_key():
    from driftgate.jobs.promote import check_gates_for_task

    check_gates_for_task(gates("macro_f1"), "multiclass")
    check_gates_for_task(gates("r2", overfitting="rmse"), "regression")
    with pytest.raises(ConfigError) as info:
        check_gates_for_task(gates("roc_auc"), "multiclass", "wine/gates.yaml")
    assert info.value.exit_code == 2
    assert str(info.value) == (
        "wine/gates.yaml: promotion.metrics.0.metric: 'roc_auc' is not a metric of a multiclass "
        "model (model.task); use one of accuracy, macro_f1, log_loss"
    )
    with pytest.raises(ConfigError, match=r"model_checks.overfitting.metric: 'roc_auc'"):
        check_gates_for_task(gates("r2", overfitting="roc_auc"), "regression")


def test_the_service_answer_per_task():
    from driftgate.serving.outputs import score, usable

    binary = score(np.array([0.2, 0.7]), "binary", (), 0.5)
    assert binary.fields == {"probabilities": [0.2, 0.7], "classes": [0, 1]}
    multi = score(np.array([[0.1, 0.9], [0.6, 0.4]]), "multiclass", ("cat", "dog"), 0.5)
    assert multi.fields["classes"] == ["dog", "cat"] and multi.fields["labels"] == ["cat", "dog"]
    assert multi.fields["probabilities"][0] == {"cat": 0.1, "dog": 0.9}
    assert list(multi.prediction) == [0.9, 0.6] and multi.predicted_label == ["dog", "cat"]
    value = score(np.array([151.5]), "regression", (), 0.5)
    assert value.fields == {"predictions": [151.5]} and list(value.predicted_class) == [-1]
    assert not usable(np.zeros((2, 3)), "multiclass", 2, 2)
    assert not usable(np.array([np.inf]), "regression", 1, 0)
