"""Checks the demo runs after each stage, so the main job proves what it claims."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from driftgate import registry
from driftgate.config import ProjectConfig
from driftgate.jobs.train import prepare_data
from training.data import feature_matrix
from training.evaluate import classification_metrics


@dataclass(frozen=True)
class ReloadCheck:
    rows: int
    reloaded_accuracy: float


def check_registered_model(config: ProjectConfig, model_uri: str) -> ReloadCheck:
    """Load ``model_uri`` through MLflow's pyfunc flavour and score the test split."""
    data = prepare_data(config)
    model = registry.load_pyfunc(config.tracking, model_uri)
    features = feature_matrix(data.splits.test, data.features)
    probabilities = np.asarray(model.predict(features)).ravel()
    metrics = classification_metrics(data.splits.test[data.target], probabilities)
    return ReloadCheck(rows=len(features), reloaded_accuracy=metrics["accuracy"])
