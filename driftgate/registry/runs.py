"""Runs: a training run logged and its model registered, a drift-check window logged."""

from __future__ import annotations

import contextlib
import json
import tempfile
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from driftgate.config import TrackingSettings
from driftgate.registry.client import connect, mlflow_client
from driftgate.registry.errors import registry_call
from driftgate.registry.model_spec import spec_tags
from driftgate.registry.names import (
    ARCHITECTURE_FILE,
    TAG_DATA_DIGEST,
    TAG_DVC_DATA_MD5,
    TAG_DVC_DATA_PATH,
    TAG_FEATURES,
    TAG_GIT_COMMIT,
    TAG_RUN_KIND,
    WEIGHTS_FOLDER,
)
from driftgate.registry.values import loggable_metrics, param_value, tag_text
from driftgate.registry.versions import mark_complete


@dataclass(frozen=True)
class RegisteredVersion:
    model_name: str
    version: str
    run_id: str
    experiment_id: str
    model_uri: str  # models:/NAME/VERSION


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
    data_md5: str,
    data_path: str,
    input_example: np.ndarray,
    features: list[str],
    model_spec: Mapping[str, Any] | None = None,
    weights_writer: Any = None,
    artifacts: Mapping[str, Path] | None = None,
    description: str = "",
    version_tags: Mapping[str, str] | None = None,
) -> RegisteredVersion:
    """Log one training run and register its model as a new version of ``model_name``.

    Logged: params, per-epoch metrics (``history``, step = epoch), final metrics, the
    environment (as ``env.*`` tags and ``environment.json``), the exact training data
    as a dataset input with its content digest, its DVC data version (``data_md5`` of
    the file ``data_path``, as ``dvc.*`` tags on run and version), the model
    (torch.export format, which loads without unpickling code) with signature and input
    example, its state dict (for ``weights_only=True`` reloads) and any extra
    ``artifacts`` (name -> file). ``weights_writer(folder)`` (the model flavour's
    ``save``) writes the weights folder; ``model_spec`` (its ``architecture.json``)
    gives the task, flavour and classes tags; ``version_tags`` are set on the version
    with the rest (before it is marked complete).
    Aliases are left alone: only the promotion gate moves them.
    """
    import mlflow
    import torch

    experiment_id = connect(tracking)
    with mlflow.start_run(experiment_id=experiment_id) as run:
        run_id = run.info.run_id
        data_version = {TAG_DVC_DATA_MD5: data_md5, TAG_DVC_DATA_PATH: data_path}
        mlflow.set_tags(
            {
                TAG_RUN_KIND: "train",
                **data_version,
                **{f"env.{k}": tag_text(v) for k, v in environment.items()},
            }
        )
        mlflow.log_params({k: param_value(v) for k, v in params.items()})
        for step, epoch_metrics in enumerate(history, start=1):
            mlflow.log_metrics(loggable_metrics(epoch_metrics), step=step)
        mlflow.log_metrics(loggable_metrics(metrics))
        mlflow.log_dict(dict(environment), "environment.json")
        with _quiet_dataset_warnings():
            dataset = mlflow.data.from_pandas(
                training_data, source=data_source, name="train", digest=data_digest
            )
            mlflow.log_input(dataset, context="training")
        with tempfile.TemporaryDirectory() as scratch:
            if weights_writer is not None:
                mlflow.log_artifacts(
                    str(weights_writer(Path(scratch) / WEIGHTS_FOLDER)),
                    artifact_path=WEIGHTS_FOLDER,
                )
            else:
                state_path = Path(scratch) / "state_dict.pt"
                torch.save(model.state_dict(), state_path)
                mlflow.log_artifact(str(state_path), artifact_path=WEIGHTS_FOLDER)
                mlflow.log_dict(model.architecture(), f"{WEIGHTS_FOLDER}/{ARCHITECTURE_FILE}")
        _log_files(artifacts or {})
        info = mlflow.pytorch.log_model(
            model,
            name="model",
            input_example=input_example,
            registered_model_name=model_name,
            pip_requirements=_pip_requirements(),
            # Explicit: MLflow's default turns to pickle on Databricks URIs, and
            # load_pyfunc refuses pickled models.
            serialization_format="pt2",
        )
    version = str(info.registered_model_version)
    client = mlflow_client(tracking)
    tags = {
        TAG_DATA_DIGEST: data_digest,
        **data_version,
        TAG_FEATURES: json.dumps(features),
        **spec_tags(model_spec),
        TAG_GIT_COMMIT: environment.get("git_commit", "unknown"),
        **{k: f"{v:.6g}" for k, v in metrics.items()},
        **(version_tags or {}),
    }
    where = f"{model_name} v{version} registered but not completed"
    for key, value in tags.items():
        registry_call(
            where,
            client.set_model_version_tag,
            model_name,
            version,
            key,
            tag_text(value),
        )
    if description:
        registry_call(
            where, client.update_model_version, model_name, version, description=description
        )
    # Last, so that a registry failure anywhere above leaves a version without it: such
    # a half-registered version is never chosen as a candidate (latest_version).
    mark_complete(tracking, model_name, version, where)
    return RegisteredVersion(
        model_name=model_name,
        version=version,
        run_id=run_id,
        experiment_id=experiment_id,
        model_uri=f"models:/{model_name}/{version}",
    )


def _log_files(artifacts: Mapping[str, Path]) -> None:
    """Log each file or folder of ``artifacts`` (artifact folder -> local path) on the
    active run."""
    import mlflow

    for folder, path in artifacts.items():
        if Path(path).is_dir():
            mlflow.log_artifacts(str(path), artifact_path=folder)
        else:
            mlflow.log_artifact(str(path), artifact_path=folder)


# MLflow warns on every training run about things that are not the user's to fix:
# a local path matches its two local-file dataset sources (both the same class), and
# the training data's schema has integer columns (the dataset is a record of the data,
# not the model's signature, which is float32). Only these two, only around the call.
_MLFLOW_DATASET_NOISE = (
    r"The specified dataset source can be interpreted in multiple ways",
    r"Hint: Inferred schema contains integer column",
)


@contextlib.contextmanager
def _quiet_dataset_warnings():
    with warnings.catch_warnings():
        for message in _MLFLOW_DATASET_NOISE:
            warnings.filterwarnings("ignore", message=message, category=UserWarning)
        yield


def log_monitoring_run(
    tracking: TrackingSettings,
    experiment: str,
    run_name: str,
    *,
    params: Mapping[str, Any],
    metrics: Mapping[str, float],
    tags: Mapping[str, str],
    artifacts: Mapping[str, Path],
) -> str:
    """Log one drift-check window as a run of the monitoring experiment; returns its id.

    ``artifacts`` maps an artifact folder to a file or folder to put there.
    """
    import mlflow

    settings = TrackingSettings(
        uri=tracking.uri,
        artifact_location=(
            tracking.artifact_location.rstrip("/") + "-monitoring"
            if tracking.artifact_location
            else None
        ),
        experiment=experiment,
    )

    def log() -> str:
        experiment_id = connect(settings)
        with mlflow.start_run(experiment_id=experiment_id, run_name=run_name) as run:
            clean = {k: tag_text(v) for k, v in tags.items()}
            mlflow.set_tags({TAG_RUN_KIND: "drift-check", **clean})
            mlflow.log_params({k: param_value(v) for k, v in params.items()})
            mlflow.log_metrics(loggable_metrics(metrics))
            _log_files(artifacts)
            return run.info.run_id

    return registry_call(f"cannot log the drift check {run_name}", log)


def log_run_artifacts(
    tracking: TrackingSettings, run_id: str, artifacts: Mapping[str, Path]
) -> None:
    """Add files to a finished run (``artifacts``: artifact folder -> local file): the
    drift check's Evidently report, rendered after the decision and the actions."""

    def log() -> None:
        client = mlflow_client(tracking)
        for folder, path in artifacts.items():
            client.log_artifact(run_id, str(path), artifact_path=folder)

    registry_call(f"cannot add {', '.join(artifacts)} to run {run_id}", log)
