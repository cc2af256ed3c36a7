"""The data step shared by training, promotion, evaluation and the demo: load the
configured data, choose features, split it in time order and validate the reference
period against the data contract.

It reads the project configuration, so it sits on the jobs layer; what it returns,
:class:`~driftgate.training.prepared.PreparedData`, is plain domain data.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pandas as pd

from driftgate.config import DataSettings, ProjectConfig
from driftgate.data_contracts.breach import ContractBreach
from driftgate.training.data import (
    DATE_COLUMN,
    DataError,
    content_digest,
    load_dataset,
    resolve_source,
    split_periods,
)
from driftgate.training.prepared import SPLIT_FILES, PreparedData, file_md5, load_splits

log = logging.getLogger(__name__)


def load_source(settings: DataSettings, task: str = "binary") -> pd.DataFrame:
    """The configured source (``data.source``) as a dated frame with a target fit for
    ``task`` (model.task): 0/1 for binary, any labels for multiclass, numbers for
    regression."""
    frame = load_dataset(settings.source, start_date=settings.start_date)
    _check_target(frame, settings.target, settings.source, task)
    return frame


def _check_target(frame: pd.DataFrame, target: str, where: str, task: str = "binary") -> None:
    if target not in frame.columns:
        raise DataError(f"{where}: target column '{target}' not found")
    labels = frame[target]
    if labels.isna().any():
        raise DataError(f"{where}: target column '{target}' has missing values")
    if task == "binary" and not set(labels.unique()) <= {0, 1}:
        raise DataError(
            f"{where}: target column '{target}' must be 0/1 for model.task binary "
            "(multiclass takes labels, regression numbers)"
        )
    if task == "regression" and not pd.api.types.is_numeric_dtype(labels):
        raise DataError(
            f"{where}: target column '{target}' must be numeric for model.task regression"
        )


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
        _check_target(
            pd.concat([splits.reference, splits.production]), settings.target, where,
            config.model.task,
        )  # fmt: skip
        data_file = folder / SPLIT_FILES["train"]
        columns = splits.train
    else:
        frame = load_source(settings, config.model.task)
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
