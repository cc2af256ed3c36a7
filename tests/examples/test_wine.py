"""examples/wine: a multiclass model from the example's own module (model.factory)."""

from __future__ import annotations

import numpy as np
import pytest

from driftgate import registry
from tests.examples.conftest import run_example, stored_samples

CLASSES = ["barbera", "barolo", "grignolino"]


@pytest.fixture(scope="module")
def wine(example_folder):
    return run_example("wine", example_folder("wine"))


def test_the_factory_module_trains_to_the_task_metrics_and_is_promoted(wine):
    metrics = wine.training.metrics
    assert {k.removeprefix("test_") for k in metrics if k.startswith("test_")} == {
        "accuracy", "macro_f1", "log_loss",
    }  # fmt: skip
    assert metrics["test_accuracy"] >= 0.8 and metrics["test_macro_f1"] >= 0.75
    assert wine.promotion.promoted, [c.name for c in wine.promotion.result.failures]
    names = {c.name for c in wine.promotion.result.checks}
    assert {"test_accuracy", "test_macro_f1", "output_shape", "reload_parity"} <= names


def test_the_version_carries_task_flavour_and_classes(wine):
    config, version = wine.config, wine.training.registered.version
    task, classes = registry.version_outputs(config.tracking, config.model.name, version)
    assert (task, list(classes)) == ("multiclass", CLASSES)
    spec = registry.load_model_spec(config.tracking, config.model.name, version)
    assert spec["flavour"] == "factory" and spec["factory"] == "wine_model:build"
    assert [f["name"] for f in spec["features"]] == wine.data.features


def test_the_service_answers_one_probability_per_cultivar(wine):
    first = wine.responses[0]
    assert first["task"] == "multiclass" and first["labels"] == CLASSES
    (probabilities,) = first["probabilities"]
    assert list(probabilities) == CLASSES
    assert sum(probabilities.values()) == pytest.approx(1.0, abs=1e-5)
    assert first["classes"] == [max(probabilities, key=probabilities.get)]
    assert "predictions" not in first


def test_the_samples_hold_the_top_probability_and_the_label(wine):
    window = stored_samples(wine.config)
    assert len(window) == len(wine.production)
    answers = [r["probabilities"][0] for r in wine.responses]
    np.testing.assert_allclose(window["prediction"], [max(a.values()) for a in answers], atol=1e-6)
    assert list(window["predicted_label"]) == [r["classes"][0] for r in wine.responses]
    assert set(window["predicted_class"]) <= {0, 1, 2}


def test_the_injected_drift_opens_a_review(wine):
    verdict = wine.verdict
    assert verdict.rows == len(wine.production)
    assert "mean-shift-kl" in verdict.breached
    (review,) = wine.reviews
    assert review.monitor == "mean-shift-kl"
    assert {"alcohol", "color_intensity"} <= set(review.features)
