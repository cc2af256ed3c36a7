"""Production samples in Parquet/CSV files: the drift check's ``--source`` reader,
with the sample store's ``read_window``."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from driftgate.stores._sql import (
    StoreError,
)
from driftgate.stores._time import to_utc
from driftgate.stores.sample_encoding import _empty_window
from driftgate.stores.sample_tables import TIMESTAMP
from driftgate.training.data import PARQUET_SUFFIXES, DataError, read_table


class FileSampleSource:
    """Production samples in Parquet or CSV files with a timestamp column.

    Args:
        path: A ``.parquet`` / ``.pq`` / ``.csv`` file or a folder of them (read in
            name order), read as training reads data (:func:`training.data.read_table`).
        timestamp_column: The column holding each sample's time; renamed to
            ``timestamp`` in the windows.
    """

    def __init__(self, path: str | Path, timestamp_column: str = TIMESTAMP) -> None:
        self.path = Path(path)
        self.timestamp_column = timestamp_column
        if not self.path.exists():
            raise StoreError(f"sample files not found: {self.path}")

    def __repr__(self) -> str:
        return f"FileSampleSource({str(self.path)!r})"

    def _files(self) -> list[Path]:
        if self.path.is_file():
            return [self.path]
        suffixes = (*PARQUET_SUFFIXES, ".csv")
        files = sorted(p for p in self.path.iterdir() if p.suffix.lower() in suffixes)
        if not files:
            raise StoreError(f"no .parquet, .pq or .csv files in {self.path}")
        return files

    def _read(self, path: Path) -> pd.DataFrame:
        try:
            frame = read_table(path)  # the reader every command uses
        except DataError as exc:
            raise StoreError(f"cannot read sample file {path}: {exc}") from exc
        if self.timestamp_column not in frame.columns:
            raise StoreError(f"{path}: no timestamp column '{self.timestamp_column}'")
        stamps = pd.to_datetime(frame[self.timestamp_column], errors="coerce")
        stamps = (
            stamps.dt.tz_localize("UTC") if stamps.dt.tz is None else stamps.dt.tz_convert("UTC")
        )
        if stamps.isna().any():
            first = int(stamps.isna().to_numpy().nonzero()[0][0])
            raise StoreError(f"{path}: unparseable timestamp at row {first}")
        frame = frame.drop(columns=[self.timestamp_column])
        frame.insert(0, TIMESTAMP, stamps)
        return frame

    def read_window(self, start: object, end: object) -> pd.DataFrame:
        """Rows with ``start <= timestamp < end`` from every file, ordered by time."""
        low, high = to_utc(start), to_utc(end)
        parts = []
        for path in self._files():
            frame = self._read(path)
            parts.append(frame[(frame[TIMESTAMP] >= low) & (frame[TIMESTAMP] < high)])
        window = pd.concat(parts, ignore_index=True) if parts else _empty_window()
        return window.sort_values(TIMESTAMP, kind="stable").reset_index(drop=True)
