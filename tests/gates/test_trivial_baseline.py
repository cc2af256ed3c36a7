"""The trivial_baseline check: a candidate must beat a constant answer, beyond chance."""

import numpy as np

from driftgate.gates.checks import GateInputs, run_checks
from driftgate.gates.checks.trivial_baseline import TrivialBaselineCheck, check_trivial_baseline

RNG = np.random.default_rng(7)
# 300 days, 65% without rain: always "no rain" scores 0.65.
LABELS = (RNG.random(300) < 0.35).astype(int)


def _model_with_accuracy(accuracy: float) -> np.ndarray:
    right = RNG.random(len(LABELS)) < accuracy
    answer = np.where(right, LABELS, 1 - LABELS)
    return np.where(answer == 1, 0.8, 0.2)  # P(rain), confident either way


def _by_name(results):
    return {r.name: r for r in results}


def test_a_model_worse_than_the_majority_class_fails_and_says_so():
    results = _by_name(
        check_trivial_baseline(
            "binary", "recent slice", LABELS, _model_with_accuracy(0.55), TrivialBaselineCheck()
        )
    )
    accuracy = results["trivial_baseline_accuracy"]
    assert not accuracy.passed and "majority class" in accuracy.message
    assert not results["trivial_baseline_log_loss"].passed


def test_a_model_that_clearly_beats_the_constant_passes():
    results = check_trivial_baseline(
        "binary", "recent slice", LABELS, _model_with_accuracy(0.9), TrivialBaselineCheck()
    )
    assert all(r.passed for r in results), [r.message for r in results]


def test_regression_is_judged_against_the_mean():
    values = RNG.normal(10, 2, 200)
    (near_mean,) = check_trivial_baseline(
        "regression", "test split", values, np.full(200, 10.5), TrivialBaselineCheck()
    )
    assert near_mean.name == "trivial_baseline_rmse" and not near_mean.passed
    (good,) = check_trivial_baseline(
        "regression",
        "test split",
        values,
        values + RNG.normal(0, 0.3, 200),
        TrivialBaselineCheck(),
    )
    assert good.passed


def test_too_few_rows_is_not_applicable_and_nan_outputs_fail():
    (few,) = check_trivial_baseline(
        "binary", "recent slice", LABELS[:10], np.full(10, 0.5), TrivialBaselineCheck()
    )
    assert few.not_applicable and "min_rows 30" in few.message
    outputs = _model_with_accuracy(0.9)
    outputs[3] = np.nan
    (broken,) = check_trivial_baseline(
        "binary", "recent slice", LABELS, outputs, TrivialBaselineCheck()
    )
    assert broken.failed


def test_the_gate_runs_it_as_a_registered_check():
    inputs = GateInputs(
        task="binary",
        judged_slice="recent slice",
        judged_targets=LABELS,
        judged_outputs=_model_with_accuracy(0.55),
    )
    results = _by_name(run_checks("model_checks", inputs))
    assert results["trivial_baseline_accuracy"].failed
