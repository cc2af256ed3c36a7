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
