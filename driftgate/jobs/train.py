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
import pandas as pd

from driftgate import registry
from driftgate.config import DataSettings, ProjectConfig
from driftgate.data_contracts.breach import ContractBreach
from driftgate.environment import describe_environment
from driftgate.training.data import (
    DATE_COLUMN,
    DataError,
    Splits,
    content_digest,
    feature_matrix,
    load_dataset,
    resolve_source,
    split_periods,
)
from driftgate.training.evaluate import classification_metrics, prefixed
from driftgate.training.model import predict_proba
from driftgate.training.prepared import SPLIT_FILES, file_md5, load_splits
from driftgate.training.train import EpochRecord, TrainingResult, train_classifier

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class PreparedData:
    splits: Splits
    features: list[str]
    target: str
    digest: str  # content hash of the exact training split
    contract_path: str | None = None
    contract_result: object | None = None  # data_contracts.ContractResult of the reference period
    # The DVC data version of the training data: the file trained from (the prepared
    # train split, else the source file) and its MD5 as DVC records it in dvc.lock.
    data_path: str = ""
    data_md5: str = ""


@dataclass(frozen=True)
class TrainingOutcome:
    registered: registry.RegisteredVersion
    metrics: dict[str, float]
    epochs_run: int
    best_epoch: int
    data_digest: str
    data_path: str = ""
    data_md5: str = ""


def load_source(settings: DataSettings) -> pd.DataFrame:
    """The configured source (``data.source``) as a dated frame with a 0/1 target."""
    frame = load_dataset(settings.source, start_date=settings.start_date)
    _check_target(frame, settings.target, settings.source)
    return frame


def _check_target(frame: pd.DataFrame, target: str, where: str) -> None:
    if target not in frame.columns:
        raise DataError(f"{where}: target column '{target}' not found")
    labels = frame[target]
    if labels.isna().any() or not set(labels.unique()) <= {0, 1}:
        raise DataError(f"{where}: target column '{target}' must be 0/1")


def prepare_data(
    config: ProjectConfig, enforce_contract: bool = True, validate_contract: bool = True
) -> PreparedData:
    """Load the data, choose features, split it in time order, and validate the
    reference period against the data contract (if any).

    With ``data.prepared`` set, the splits are read from that folder (written by
    ``driftgate prepare``, versioned by DVC); otherwise ``data.source`` is loaded and
    split here. With ``enforce_contract`` a breach raises ContractBreach; without, the
    result is returned for the caller to report (the promotion gate does).
    ``validate_contract=False`` skips Great Expectations, for steps that only score
    data an earlier step validated.
    """
    settings = config.data
    if settings.prepared is not None:
        folder = config.resolve(settings.prepared)
        splits = load_splits(folder)
        where = str(folder)
        _check_target(pd.concat([splits.reference, splits.production]), settings.target, where)
        data_file = folder / SPLIT_FILES["train"]
        columns = splits.train
    else:
        frame = load_source(settings)
        where = settings.source
        splits = split_periods(
            frame, settings.reference_rows, settings.validation_share, settings.test_share
        )
        data_file = resolve_source(settings.source)
        columns = frame
    if settings.features is None:
        features = [
            c
            for c in columns.columns
            if c not in (DATE_COLUMN, settings.target) and pd.api.types.is_numeric_dtype(columns[c])
        ]
    else:
        features = list(settings.features)
    contract_result = None
    if settings.contract is not None and validate_contract:
        contract_result = check_contract(
            settings.contract, splits.reference, where, enforce=enforce_contract
        )
    return PreparedData(
        splits=splits,
        features=features,
        target=settings.target,
        digest=content_digest(splits.train),
        contract_path=settings.contract,
        contract_result=contract_result,
        data_path=_relative_to(data_file, config.root),
        data_md5=file_md5(data_file),
    )


def _relative_to(path: Path, root: Path) -> str:
    """``path`` relative to the project root when inside it (as dvc.lock names it)."""
    path = path.resolve()
    try:
        return path.relative_to(root.resolve()).as_posix()
    except ValueError:
        return str(path)


def check_contract(contract_path: str, frame: pd.DataFrame, source: str, enforce: bool = True):
    """Validate ``frame`` (the reference period) with Great Expectations; raise
    ContractBreach listing every broken rule, so nothing trains on broken data."""
    from driftgate.data_contracts import Contract, validate_batch

    result = validate_batch(Contract.load(contract_path), frame)
    if enforce and not result.passed:
        raise ContractBreach(source, result)
    log.info("data contract '%s': %d rules passed", result.contract, len(result.rules))
    return result


def fit_model(
    config: ProjectConfig,
    data: PreparedData,
    on_epoch: Callable[[EpochRecord], None] | None = None,
) -> TrainingResult:
    splits = data.splits
    return train_classifier(
        feature_matrix(splits.train, data.features),
        splits.train[data.target].to_numpy(),
        feature_matrix(splits.validation, data.features),
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
        probabilities = predict_proba(result.model, feature_matrix(frame, data.features))
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
        "data_source": config.data.source,
        "train_rows": len(splits.train),
        "val_rows": len(splits.validation),
        "test_rows": len(splits.test),
        "train_start": str(splits.train[DATE_COLUMN].iloc[0].date()),
        "train_end": str(splits.train[DATE_COLUMN].iloc[-1].date()),
        "data_contract": (
            f"{data.contract_result.contract} v{data.contract_result.version}"
            if data.contract_result is not None
            else "none"
        ),
        "epochs_run": result.epochs_run,
        "best_epoch": result.best_epoch,
    }
    history = [{"train_loss": r.train_loss, "val_loss": r.val_loss} for r in result.history]
    example = feature_matrix(splits.validation.head(5), data.features)
    description = (
        f"TabularClassifier {result.model.hidden_sizes} on {len(splits.train)} training days "
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
        registered = registry.log_training_run(
            config.tracking,
            config.model.name,
            result.model,
            params=params,
            history=history,
            metrics=metrics,
            environment=describe_environment(config.root),
            training_data=splits.train,
            data_source=str(config.resolve(data.data_path)),
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
        schema=dict.fromkeys(data.features, "numeric"),
        metadata={"model": model_name, "data_digest": data.digest, "split": "train"},
    )


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
