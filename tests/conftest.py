"""Shared fixtures: one project folder and one MLflow store per test session.

Registering a model costs seconds on a fresh SQLite store, so the trained-and-registered
model is built once and shared by every test that only reads it.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def project_dir(tmp_path_factory) -> Path:
    """A copy of the repository's config files in a temporary folder with its own home."""
    root = tmp_path_factory.mktemp("project")
    shutil.copy(REPO_ROOT / "params.yaml", root / "params.yaml")
    (root / "gates").mkdir()
    shutil.copy(REPO_ROOT / "gates" / "gates.yaml", root / "gates" / "gates.yaml")
    text = (REPO_ROOT / "driftgate.yaml").read_text()
    (root / "driftgate.yaml").write_text(text.replace("home: .driftgate", "home: state"))
    return root


@pytest.fixture(scope="session")
def project_config(project_dir):
    from driftgate.config import load_config

    return load_config(project_dir / "driftgate.yaml")


@dataclass
class TrainedModel:
    config: object
    data: object
    result: object
    metrics: dict
    outcome: object


@pytest.fixture(scope="session")
def trained_model(project_config) -> TrainedModel:
    """The training job's steps run once, keeping the in-memory model for comparisons."""
    from driftgate.jobs import train as job

    data = job.prepare_data(project_config)
    result = job.fit_model(project_config, data, on_epoch=None)
    metrics = job.evaluate_model(data, result)
    outcome = job.register_model(project_config, data, result, metrics)
    return TrainedModel(project_config, data, result, metrics, outcome)
