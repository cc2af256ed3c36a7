"""examples/diabetes: a regression model with the built-in MLP."""

from __future__ import annotations

import numpy as np
import pytest

from driftgate import registry
from tests.examples.conftest import run_example, stored_samples


@pytest.fixture(scope="module")
def diabetes(example_folder):
    return run_example("diabetes", example_folder("diabetes"))


def test_the_regression_metrics_pass_the_gates(diabetes):
    metrics = diabetes.training.metrics
    assert {k.removeprefix("test_") for k in metrics if k.startswith("test_")} == {
        "rmse", "mae", "r2",
    }  # fmt: skip
    assert metrics["test_r2"] >= 0.25 and metrics["test_rmse"] <= 70
    assert diabetes.promotion.promoted, [c.name for c in diabetes.promotion.result.failures]
    degenerate = next(c for c in diabetes.promotion.result.checks if c.name == "degenerate_output")
    assert degenerate.observed.startswith("relative spread")


def test_the_service_answers_values_in_the_targets_units(diabetes):
    config, version = diabetes.config, diabetes.training.registered.version
    assert registry.version_outputs(config.tracking, config.model.name, version) == (
        "regression", (),
    )  # fmt: skip
    first = diabetes.responses[0]
    assert first["task"] == "regression"
    assert "probabilities" not in first and "classes" not in first
    values = np.array([r["predictions"][0] for r in diabetes.responses])
    # Disease progression runs 25..346: a value in those units, not a standardised one.
    assert 25 <= np.median(values) <= 346 and values.std() > 1


def test_the_samples_hold_the_predicted_value(diabetes):
    window = stored_samples(diabetes.config)
    np.testing.assert_allclose(
        window["prediction"], [r["predictions"][0] for r in diabetes.responses], rtol=1e-6
    )
    assert set(window["predicted_class"]) == {-1} and window["predicted_label"].isna().all()


def test_the_injected_drift_opens_a_review(diabetes):
    verdict = diabetes.verdict
    assert verdict.rows == len(diabetes.production)
    assert "mean-shift-kl" in verdict.breached
    (review,) = diabetes.reviews
    assert {"bmi", "s5"} <= set(review.features)


def test_the_error_is_estimated_before_any_label_or_said_unreliable(diabetes):
    """DLE on a trained regression (issue 31): the training job fitted the loss model
    with the outputs profile; the drift check estimates the window's RMSE from its
    features, or says why the estimate cannot be trusted, never a bare number."""
    from driftgate.jobs.drift_check import load_champion_profile

    config, version = diabetes.config, diabetes.training.registered.version
    outputs = load_champion_profile(config, version).outputs
    assert set(outputs.estimated) == {"mae", "rmse"}
    assert outputs.state["rmse"]["loss_model"]["method"] == "hist_gradient_boosting"
    result = next(r for r in diabetes.verdict.results if r.monitor == "estimated-rmse")
    assert result.details["reference_estimate"] == pytest.approx(outputs.estimated["rmse"])
    assert result.details["reliability"]["checked"] == 11  # 10 inputs and the prediction
    # The injected drift moves bmi and s5 past anything the validation split held
    # (measured: 73% of the window's records): the estimate says it cannot be trusted.
    assert result.status == "insufficient_data" and not result.breached
    assert result.reason.startswith("estimate unreliable: ")
    assert {"s5", "bmi"} <= set(result.details["reliability"]["columns"])
