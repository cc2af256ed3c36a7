"""The sample store: every scored record with its prediction, for the drift checks.

The inference service appends one batch per group commit (:meth:`SqlSampleStore.append`
returns only once the batch is durable); the drift-check flow reads a *window* of
samples back as a frame (:meth:`read_window`). Users whose serving lives elsewhere point
the drift check at Parquet/CSV files instead (:class:`FileSampleSource`), which offers
the same ``read_window``.

A window is half-open, ``start <= timestamp < end``, so consecutive windows never count
a sample twice. Timestamps are UTC; naive datetimes are taken as UTC.

Features are stored as one JSON object per sample rather than one column per feature:
the store then outlives model versions whose feature lists differ, and a window that
spans two versions comes back as the union of their columns (NaN where a version did
not have a feature).
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Protocol

import pandas as pd
from sqlalchemy import (
    BigInteger,
    Column,
    Float,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    bindparam,
    func,
    select,
    text,
)
from sqlalchemy.exc import OperationalError

from driftgate.stores._sql import (
    FileIdentity,
    StoreError,
    StoreReplaced,
    create_store_engine,
    create_tables,
    ensure_store_id,
    identity_problem,
    is_sql_url,
    redact,
    sqlite_path,
    write_problem,
    write_transaction,
)
from driftgate.training.data import PARQUET_SUFFIXES, DataError, read_table

log = logging.getLogger(__name__)

TIMESTAMP = "timestamp"
# Columns of every window, in order; feature columns go between META and OUTPUT.
META_COLUMNS = (
    TIMESTAMP,
    "received_at",
    "model_name",
    "model_version",
    "request_id",
    "record_index",
)
OUTPUT_COLUMNS = ("prediction", "predicted_class", "predicted_label")
SAMPLES_TABLE = "driftgate_samples"
# Windows come back with pandas datetime64[ns] columns, which span 1677-09-21 to
# 2262-04-11: the store keeps event times inside this (half-open) range.
EARLIEST_TIMESTAMP = datetime(1678, 1, 1, tzinfo=UTC)
LATEST_TIMESTAMP = datetime(2262, 1, 1, tzinfo=UTC)

_metadata = MetaData()
samples_table = Table(
    SAMPLES_TABLE,
    _metadata,
    # BIGINT on PostgreSQL; INTEGER PRIMARY KEY on SQLite is the rowid (autoincrement).
    Column("id", BigInteger().with_variant(Integer, "sqlite"), primary_key=True),
    Column("ts_us", BigInteger, nullable=False),  # event time, microseconds since epoch UTC
    Column("received_us", BigInteger, nullable=False),
    Column("model_name", String(256), nullable=False),
    Column("model_version", String(64), nullable=False),
    Column("request_id", String(128), nullable=False),
    Column("record_index", Integer, nullable=False),
    Column("features", Text, nullable=False),  # JSON object: field -> value
    # binary: P(class 1); multiclass: the top class's probability; regression: the value.
    Column("prediction", Float, nullable=False),
    # binary: 0/1; multiclass: the class index; regression: -1 (no class).
    Column("predicted_class", Integer, nullable=False),
    # multiclass: the predicted class's label; NULL otherwise and in stores made before it.
    Column("predicted_label", String(256), nullable=True),
    Index(f"ix_{SAMPLES_TABLE}_ts", "ts_us"),
    Index(f"ix_{SAMPLES_TABLE}_request", "request_id"),
)


# Built once: constructing a statement per batch costs more than running it.
_KNOWN_REQUEST_IDS = (
    select(samples_table.c.request_id)
    .where(samples_table.c.request_id.in_(bindparam("ids", expanding=True)))
    .distinct()
)


@dataclass(frozen=True)
class Sample:
    """One scored record.

    Attributes:
        timestamp: When the record happened (the request's time unless the client
            supplied one); windows select on it.
        request_id: The request's id; every record of a request shares it.
        record_index: Position of the record in its request.
        model_name: Registered model name.
        model_version: The version that scored it.
        features: The record as received (field -> number, or category as text).
        prediction: binary: P(class 1); multiclass: the top class's probability;
            regression: the predicted value.
        predicted_class: binary: 0 or 1; multiclass: the class's index into the
            version's classes; regression: -1.
        received_at: When the service received it (default: ``timestamp``).
        predicted_label: multiclass: the predicted class's label; None otherwise.
    """

    timestamp: datetime
    request_id: str
    record_index: int
    model_name: str
    model_version: str
    features: Mapping[str, float | int | str | None]
    prediction: float
    predicted_class: int
    received_at: datetime | None = field(default=None)
    predicted_label: str | None = field(default=None)


class DuplicateRequestIds(StoreError):
    """Samples were refused because their request ids are already in the store."""

    def __init__(self, request_ids: set[str]) -> None:
        super().__init__(f"{len(request_ids)} request id(s) already stored")
        self.request_ids = request_ids


class SampleWindowReader(Protocol):
    """Anything the drift check can read a window of production samples from."""

    def read_window(self, start: object, end: object) -> pd.DataFrame:
        """Samples with ``start <= timestamp < end``, ordered by time."""
        ...


def to_utc(moment: object) -> pd.Timestamp:
    """A datetime, pandas Timestamp or ISO string as a UTC Timestamp (naive = UTC)."""
    stamp = pd.Timestamp(moment)
    if stamp is pd.NaT:
        raise ValueError(f"not a time: {moment!r}")
    return stamp.tz_localize("UTC") if stamp.tzinfo is None else stamp.tz_convert("UTC")


def _to_us(moment: object) -> int:
    return to_utc(moment).value // 1000


def _storable_us(moment: datetime) -> int:
    stamp = to_utc(moment)
    if not EARLIEST_TIMESTAMP <= stamp < LATEST_TIMESTAMP:
        raise ValueError(
            f"sample time {moment!r} outside [{EARLIEST_TIMESTAMP:%Y-%m-%d}, "
            f"{LATEST_TIMESTAMP:%Y-%m-%d})"
        )
    return stamp.value // 1000


def _json_value(value):
    # JSON has no NaN/Infinity; store them as null (the validator rejects them anyway).
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def _empty_window() -> pd.DataFrame:
    frame = pd.DataFrame({name: pd.Series(dtype=object) for name in META_COLUMNS + OUTPUT_COLUMNS})
    for name in (TIMESTAMP, "received_at"):
        frame[name] = pd.to_datetime(frame[name], utc=True)
    return frame


# Columns added after the table's first release: nullable, added to an older store when
# it is opened (the rows it already holds read back as NULL).
_ADDED_COLUMNS = {"predicted_label": "VARCHAR(256)"}


def _add_missing_columns(engine, url: str) -> None:
    from sqlalchemy import inspect

    present = {c["name"] for c in inspect(engine).get_columns(SAMPLES_TABLE)}
    for name, sql_type in _ADDED_COLUMNS.items():
        if name in present:
            continue
        try:
            with engine.begin() as connection:
                connection.execute(
                    text(f"ALTER TABLE {SAMPLES_TABLE} ADD COLUMN {name} {sql_type}")
                )
        except Exception as exc:  # another opener may have added it first
            now = {c["name"] for c in inspect(engine).get_columns(SAMPLES_TABLE)}
            if name not in now:
                raise StoreError(
                    f"cannot add column {name} to sample store {redact(url)}: {exc}"
                ) from exc


class SqlSampleStore:
    """Samples in SQLite (default) or PostgreSQL, through SQLAlchemy Core.

    Args:
        url: ``sqlite:///PATH`` or ``postgresql://USER@HOST/DB``.
        sqlite_synchronous: ``FULL`` (survives power loss) or ``NORMAL`` (survives a
            killed process); see :mod:`driftgate.stores._sql`.
    """

    def __init__(self, url: str, *, sqlite_synchronous: str = "FULL") -> None:
        self.url = url
        self.engine = create_store_engine(url, sqlite_synchronous=sqlite_synchronous)
        create_tables(self.engine, _metadata, url, "sample")
        _add_missing_columns(self.engine, url)
        self.store_id = ensure_store_id(self.engine, url, "sample")
        path = sqlite_path(self.engine)
        self.file = FileIdentity.of(path) if path is not None else None
        self._had_write_problem = False

    def __repr__(self) -> str:
        return f"SqlSampleStore({redact(self.url)!r})"

    def append(self, samples: Sequence[Sample], *, refuse_known_request_ids: bool = False) -> int:
        """Insert ``samples`` in one transaction; durable when this returns.

        Returns the number of rows written. Raises on failure, in which case none of
        the batch is stored (or, for :class:`StoreReplaced` after the commit, it is
        stored in a file that is no longer the store's). With
        ``refuse_known_request_ids``, a batch holding a request id that is already
        stored raises :class:`DuplicateRequestIds` and stores nothing.
        """
        if not samples:
            return 0
        self._raise_if_replaced()
        rows = [
            {
                "ts_us": _storable_us(s.timestamp),
                "received_us": _storable_us(s.received_at or s.timestamp),
                "model_name": s.model_name,
                "model_version": s.model_version,
                "request_id": s.request_id,
                "record_index": s.record_index,
                "features": json.dumps(
                    {k: _json_value(v) for k, v in s.features.items()}, allow_nan=False
                ),
                "prediction": float(s.prediction),
                "predicted_class": int(s.predicted_class),
                "predicted_label": s.predicted_label,
            }
            for s in samples
        ]
        try:
            # BEGIN IMMEDIATE on SQLite: a deferred transaction that reads first (the
            # identity and id checks) fails at once, not after the busy timeout, when
            # another writer commits before its INSERT.
            with write_transaction(self.engine) as connection:
                if problem := identity_problem(connection, self.store_id, None):
                    raise StoreReplaced(f"sample store {redact(self.url)}: {problem}")
                if refuse_known_request_ids:
                    ids = list({r["request_id"] for r in rows})
                    known = set(connection.execute(_KNOWN_REQUEST_IDS, {"ids": ids}).scalars())
                    if known:
                        raise DuplicateRequestIds(known)
                connection.execute(samples_table.insert(), rows)
        except OperationalError:
            # A SQLite connection opened while the file was read-only stays read-only
            # after the file is writable again: start over with fresh connections.
            self.engine.dispose()
            raise
        # Deleted during the commit: the rows are in the unlinked file, lost with it.
        self._raise_if_replaced()
        return len(rows)

    def _raise_if_replaced(self) -> None:
        if self.file is not None and (problem := self.file.problem()):
            raise StoreReplaced(f"sample store {redact(self.url)}: {problem}")

    def write_problem(self) -> str | None:
        """Why the store cannot take samples right now (read-only, locked, deleted,
        replaced, unreachable), or None. Writes nothing."""
        problem = write_problem(self.engine, self.store_id, self.file)
        if self._had_write_problem and problem is None:
            self.engine.dispose()  # connections opened during the problem may be read-only
        self._had_write_problem = problem is not None
        return problem

    def read_window(self, start: object, end: object, model_version: str | None = None):
        """Samples with ``start <= timestamp < end`` (optionally of one version) as a frame.

        Columns: timestamp, received_at (UTC), model_name, model_version, request_id,
        record_index, one column per feature (union over the window, in order of first
        appearance), prediction, predicted_class, predicted_label (see :class:`Sample`).
        """
        query = (
            select(samples_table)
            .where(samples_table.c.ts_us >= _to_us(start), samples_table.c.ts_us < _to_us(end))
            .order_by(samples_table.c.ts_us, samples_table.c.id)
        )
        if model_version is not None:
            query = query.where(samples_table.c.model_version == str(model_version))
        with self.engine.connect() as connection:
            rows = connection.execute(query).mappings().all()
        if not rows:
            return _empty_window()
        features = pd.DataFrame.from_records([json.loads(row["features"]) for row in rows])
        meta = pd.DataFrame(
            {
                TIMESTAMP: pd.to_datetime([row["ts_us"] for row in rows], unit="us", utc=True),
                "received_at": pd.to_datetime(
                    [row["received_us"] for row in rows], unit="us", utc=True
                ),
                "model_name": [row["model_name"] for row in rows],
                "model_version": [row["model_version"] for row in rows],
                "request_id": [row["request_id"] for row in rows],
                "record_index": [row["record_index"] for row in rows],
            }
        )
        outputs = pd.DataFrame(
            {
                "prediction": [row["prediction"] for row in rows],
                "predicted_class": [row["predicted_class"] for row in rows],
                "predicted_label": [row["predicted_label"] for row in rows],
            }
        )
        clashing = [c for c in features.columns if c in META_COLUMNS + OUTPUT_COLUMNS]
        features = features.rename(columns={c: f"feature.{c}" for c in clashing})
        return pd.concat([meta, features, outputs], axis=1)

    def count(self) -> int:
        with self.engine.connect() as connection:
            return int(connection.execute(select(func.count()).select_from(samples_table)).scalar())

    def request_ids(self) -> set[str]:
        """Every stored request id (for audits and tests)."""
        with self.engine.connect() as connection:
            return set(connection.execute(select(samples_table.c.request_id).distinct()).scalars())

    def ping(self) -> None:
        """Raise if the database cannot be reached."""
        with self.engine.connect() as connection:
            connection.execute(text("SELECT 1"))

    def close(self) -> None:
        self.engine.dispose()


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


def open_sample_reader(location: str, timestamp_column: str = TIMESTAMP) -> SampleWindowReader:
    """A window reader for a store URL (``sqlite:``/``postgresql:``) or a file/folder path."""
    if is_sql_url(location):
        return SqlSampleStore(location)
    return FileSampleSource(location, timestamp_column=timestamp_column)


def utc_now() -> datetime:
    return datetime.now(UTC)
