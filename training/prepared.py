"""Prepared data on disk: the folder ``driftgate prepare`` writes and DVC versions.

One Parquet file per split (``train``, ``validation``, ``test``, ``production``) plus
``raw.parquet``, the whole dated data set they were cut from. Parquet keeps dtypes
and the row index exactly, so a split read back has the same content digest
(:func:`training.data.content_digest`) as the split it was written from.

:func:`file_md5` hashes a file the way DVC 3 does for ``dvc.lock`` (plain MD5 of the
bytes), so a training run can record the DVC data version of its input without
DVC running it.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from driftgate.core.parquet import read_parquet
from driftgate.training.data import DataError, Splits
from driftgate.training.features import FeatureSpec, numeric_specs

RAW_FILE = "raw.parquet"
# Written into a retrain's prepared folder beside the splits: how many production rows
# each split gained (jobs/retrain_data.py); its presence marks a retrain's data.
WINDOW_ROWS_FILE = "window_rows.txt"


def read_window_rows(folder: Path) -> dict[str, int]:
    """What ``WINDOW_ROWS_FILE`` in ``folder`` records (split -> production rows added at
    its end, plus counts of unverified labels); empty when the folder has none."""
    path = Path(folder) / WINDOW_ROWS_FILE
    if not path.is_file():
        return {}
    pairs = (line.split() for line in path.read_text().splitlines() if line.strip())
    return {name: int(rows) for name, rows in pairs}


SPLIT_FILES = {
    "train": "train.parquet",
    "validation": "validation.parquet",
    "test": "test.parquet",
    "production": "production.parquet",
}


@dataclass(frozen=True)
class PreparedData:
    """The splits of one data version, the features chosen and what the contract said."""

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
    # Kind and categories of each feature, in ``features`` order; empty means all numeric.
    feature_specs: tuple[FeatureSpec, ...] = ()

    @property
    def specs(self) -> list[FeatureSpec]:
        """One spec per feature, in order: what the model is built and scored with."""
        return list(self.feature_specs) or numeric_specs(self.features)


def save_prepared(raw: pd.DataFrame, splits: Splits, folder: Path) -> dict[str, Path]:
    """Write ``raw.parquet`` and one file per split into ``folder``; return name -> path."""
    folder.mkdir(parents=True, exist_ok=True)
    files = {"raw": folder / RAW_FILE}
    raw.to_parquet(files["raw"])
    for name, file_name in SPLIT_FILES.items():
        files[name] = folder / file_name
        getattr(splits, name).to_parquet(files[name])
    return files


def load_splits(folder: Path) -> Splits:
    """Read the four split files; DataError names a missing or unreadable file."""
    frames = {}
    for name, file_name in SPLIT_FILES.items():
        path = folder / file_name
        if not path.is_file():
            raise DataError(
                f"prepared data file not found: {path} "
                "(run `driftgate prepare`, `dvc repro prepare` or `dvc pull`)"
            )
        try:
            frames[name] = read_parquet(path)
        except Exception as exc:  # pyarrow raises many types; the user needs the file name
            raise DataError(f"cannot read prepared data file {path}: {exc}") from exc
    return Splits(**frames)


def file_md5(path: Path, chunk_size: int = 1 << 20) -> str:
    """MD5 of the file's bytes: the ``md5`` DVC 3 records in dvc.lock for a file output."""
    digest = hashlib.md5()
    with open(path, "rb") as stream:
        while chunk := stream.read(chunk_size):
            digest.update(chunk)
    return digest.hexdigest()
