"""The one module that talks to MLflow (tracking and model registry).

Everything else in driftgate hands plain values to these functions; swapping the
local SQLite store for a tracking server is a change of URI, not of code.
"""

from __future__ import annotations

import json
import logging
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from driftgate.config import TrackingSettings

log = logging.getLogger(__name__)

# Tags every model version carries, so the MLflow UI and later gates can read them.
TAG_DATA_DIGEST = "driftgate.data.train_digest"
TAG_FEATURES = "driftgate.features"
TAG_GIT_COMMIT = "driftgate.git_commit"
TAG_RUN_KIND = "driftgate.run_kind"


class RegistryError(RuntimeError):
    """The tracking store or registry refused or failed an operation."""


@dataclass(frozen=True)
class RegisteredVersion:
    model_name: str
    version: str
    run_id: str
    experiment_id: str
    model_uri: str  # models:/NAME/VERSION


def connect(tracking: TrackingSettings) -> str:
    """Point MLflow at the configured store and make sure the experiment exists.

    Returns the experiment id. The experiment's artifact location is set on creation,
    so a local store keeps its artifacts under the driftgate home, not in ./mlruns.
    """
    import mlflow

    mlflow.set_tracking_uri(tracking.uri)
    mlflow.set_registry_uri(tracking.uri)
    experiment = mlflow.get_experiment_by_name(tracking.experiment)
    if experiment is not None:
        return experiment.experiment_id
    try:
        return mlflow.create_experiment(
            tracking.experiment, artifact_location=tracking.artifact_location
        )
    except Exception:
        # Another process may have created it between our lookup and create.
        experiment = mlflow.get_experiment_by_name(tracking.experiment)
        if experiment is None:
            raise
        return experiment.experiment_id


def _pip_requirements() -> list[str]:
    """Pin what the logged model needs; also spares MLflow's slow requirement inference."""
    from importlib.metadata import version

    torch_version = version("torch").split("+")[0]  # drop the local label (+cpu)
    return [f"torch=={torch_version}", f"mlflow=={version('mlflow')}", f"numpy=={version('numpy')}"]


def log_training_run(
    tracking: TrackingSettings,
    model_name: str,
    model: Any,
    *,
    params: Mapping[str, Any],
    history: list[Mapping[str, float]],
    metrics: Mapping[str, float],
    environment: Mapping[str, str],
    training_data: pd.DataFrame,
    data_source: str,
    data_digest: str,
    input_example: np.ndarray,
    features: list[str],
    artifacts: Mapping[str, Path] | None = None,
    description: str = "",
) -> RegisteredVersion:
    """Log one training run and register its model as a new version of ``model_name``.

    Logged: params, per-epoch metrics (``history``, step = epoch), final metrics, the
    environment (as ``env.*`` tags and ``environment.json``), the exact training data
    as a dataset input with its content digest, the model (torch.export format, which
    loads without unpickling code) with signature and input example, its state dict
    (for ``weights_only=True`` reloads) and any extra ``artifacts`` (name -> file).
    Aliases are left alone: only the promotion gate moves them.
    """
    import mlflow
    import torch
    from mlflow import MlflowClient

    experiment_id = connect(tracking)
    with mlflow.start_run(experiment_id=experiment_id) as run:
        run_id = run.info.run_id
        mlflow.set_tags({TAG_RUN_KIND: "train", **{f"env.{k}": v for k, v in environment.items()}})
        mlflow.log_params({k: _param_value(v) for k, v in params.items()})
        for step, epoch_metrics in enumerate(history, start=1):
            mlflow.log_metrics(dict(epoch_metrics), step=step)
        mlflow.log_metrics(dict(metrics))
        mlflow.log_dict(dict(environment), "environment.json")
        dataset = mlflow.data.from_pandas(
            training_data, source=data_source, name="train", digest=data_digest
        )
        mlflow.log_input(dataset, context="training")
        with tempfile.TemporaryDirectory() as scratch:
            state_path = Path(scratch) / "state_dict.pt"
            torch.save(model.state_dict(), state_path)
            mlflow.log_artifact(str(state_path), artifact_path="weights")
            mlflow.log_dict(model.architecture(), "weights/architecture.json")
        for name, path in (artifacts or {}).items():
            mlflow.log_artifact(str(path), artifact_path=name)
        info = mlflow.pytorch.log_model(
            model,
            name="model",
            input_example=input_example,
            registered_model_name=model_name,
            pip_requirements=_pip_requirements(),
        )
    version = str(info.registered_model_version)
    client = MlflowClient()
    tags = {
        TAG_DATA_DIGEST: data_digest,
        TAG_FEATURES: json.dumps(features),
        TAG_GIT_COMMIT: environment.get("git_commit", "unknown"),
        **{k: f"{v:.6g}" for k, v in metrics.items()},
    }
    for key, value in tags.items():
        client.set_model_version_tag(model_name, version, key, value)
    if description:
        client.update_model_version(model_name, version, description=description)
    return RegisteredVersion(
        model_name=model_name,
        version=version,
        run_id=run_id,
        experiment_id=experiment_id,
        model_uri=f"models:/{model_name}/{version}",
    )


def _param_value(value: Any) -> str | int | float | bool:
    if isinstance(value, str | int | float | bool):
        return value
    return json.dumps(value)


def load_pyfunc(tracking: TrackingSettings, model_uri: str):
    """Load a registered model (``models:/NAME/VERSION`` or ``models:/NAME@alias``)."""
    import mlflow

    mlflow.set_tracking_uri(tracking.uri)
    return mlflow.pyfunc.load_model(model_uri)


def run_metrics(tracking: TrackingSettings, run_id: str) -> dict[str, float]:
    from mlflow import MlflowClient

    return dict(MlflowClient(tracking_uri=tracking.uri).get_run(run_id).data.metrics)


CHAMPION_ALIAS = "champion"
PREVIOUS_CHAMPION_ALIAS = "previous-champion"


def alias_version(tracking: TrackingSettings, model_name: str, alias: str) -> str | None:
    """The version an alias points at, or None when the alias (or model) does not exist."""
    from mlflow import MlflowClient
    from mlflow.exceptions import MlflowException

    client = MlflowClient(tracking_uri=tracking.uri, registry_uri=tracking.uri)
    try:
        aliases = client.get_registered_model(model_name).aliases
    except MlflowException as exc:
        if exc.error_code == "RESOURCE_DOES_NOT_EXIST":
            return None
        raise RegistryError(f"cannot read model '{model_name}': {exc.message}") from exc
    version = aliases.get(alias)
    return str(version) if version is not None else None


def version_features(tracking: TrackingSettings, model_name: str, version: str) -> list[str]:
    """Feature order the version was trained with (its ``driftgate.features`` tag)."""
    from mlflow import MlflowClient

    client = MlflowClient(tracking_uri=tracking.uri, registry_uri=tracking.uri)
    tags = client.get_model_version(model_name, version).tags
    if TAG_FEATURES not in tags:
        raise RegistryError(f"{model_name} v{version} has no {TAG_FEATURES} tag")
    return json.loads(tags[TAG_FEATURES])
