"""The sample store: every scored record with its prediction, for the drift checks.

The inference service appends one batch per group commit (:meth:`SqlSampleStore.append`
returns only once the batch is durable); the drift-check flow reads a *window* of
samples back, as one frame (:meth:`~SqlSampleStore.read_window`, small windows) or as a
stream of bounded chunks (:meth:`~SqlSampleStore.iter_window`: a server-side cursor on
PostgreSQL, ``fetchmany`` over one statement on SQLite), so a window of millions of
rows never sits in memory at once. Users whose serving lives elsewhere point the drift
check at Parquet/CSV files instead (:class:`FileSampleSource`), which offers the same
``read_window``.

A window is half-open, ``start <= timestamp < end``, so consecutive windows never count
a sample twice. Timestamps are UTC; naive datetimes are taken as UTC.

**Layout** (``docs/serving.md``, "The sample layout"). A store created by this version
is *columnar*: a sample's numeric feature values are one binary ``numbers`` column
(little-endian float64, in the order of its *schema*), any other value (a categorical
string, a boolean) is kept raw in a JSON list ``others``, and ``schema_id`` points to a
row of ``driftgate_sample_schemas`` naming the fields and their kinds. A chunk of rows
with one schema decodes with one ``numpy.frombuffer``: no per-value parsing. The store
still outlives model versions whose feature lists differ (each list is its own schema),
and a window that spans two versions comes back as the union of their columns (NaN
where a version did not have a feature). On PostgreSQL the table is partitioned by day
of event time, so retention drops whole partitions. A store created before (one JSON
``features`` object per row) keeps that layout: it opens, is written and is read as
before, chunked too (dual read; ``SqlSampleStore.layout`` says which).
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import hashlib
import hmac
import json
import logging
import math
import secrets
import struct
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Protocol

import numpy as np
import pandas as pd
from sqlalchemy import (
    BigInteger,
    Column,
    Connection,
    Float,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Table,
    Text,
    bindparam,
    func,
    inspect,
    select,
    text,
)
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.exc import IntegrityError, OperationalError, ProgrammingError

from driftgate.stores._sql import (
    FileIdentity,
    StoreError,
    StoreReplaced,
    WriteProbe,
    create_store_engine,
    create_tables,
    delete_in_batches,
    ensure_single_value,
    ensure_store_id,
    identity_problem,
    is_sql_url,
    redact,
    single_value_table,
    sqlite_path,
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
SCHEMAS_TABLE = "driftgate_sample_schemas"
LEASES_TABLE = "driftgate_sample_leases"
# Windows come back with pandas datetime64[ns] columns, which span 1677-09-21 to
# 2262-04-11: the store keeps event times inside this (half-open) range.
EARLIEST_TIMESTAMP = datetime(1678, 1, 1, tzinfo=UTC)
LATEST_TIMESTAMP = datetime(2262, 1, 1, tzinfo=UTC)
# Rows per chunk of iter_window unless told (the drift check passes
# monitoring.partition_rows).
DEFAULT_CHUNK_ROWS = 100_000
# Rows fetched from the database at a time: they are decoded to arrays at once, so the
# driver's row objects never hold more than this many. Measured on a 1M-row window of 8
# features (benchmarks/sample_store_bench.py): 10,000 rows weigh 2 MiB in sqlite3's and
# 4.5 MiB in psycopg's row objects and libpq's result; 5,000 halve that at about the
# same speed (PostgreSQL read + check 2.43 s vs 2.34 s at 10,000, within the spread of
# three runs each; 2,500 reads slower there).
FETCH_ROWS = 5_000
# A reader's lease on a window lasts this long unless renewed (a reader that died lets
# retention go on after it); iter_window renews it as it reads.
LEASE_SECONDS = 3600.0
# Rows deleted per transaction where retention deletes rows (SQLite, unpartitioned
# PostgreSQL): short transactions, so the service's group commits wait milliseconds.
PURGE_BATCH_ROWS = 10_000
# How long retention waits for the lock that drops a PostgreSQL partition (see purge).
DROP_LOCK_WAIT_MS = 500
LAYOUT_COLUMNAR = "columnar"
LAYOUT_JSON = "json"  # stores created before the columnar layout
_US_PER_DAY = 86_400_000_000
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
# Kinds of a schema's fields: numbers go to the float64 blob, everything else
# (categorical strings, booleans) is kept raw, as JSON.
NUMBER, OTHER = "n", "o"
# A client key: the first 16 hex characters of an HMAC of the caller's identity.
CLIENT_KEY_CHARS = 16
# The client of the rows stored without a key (before keys were kept): one unknown
# client to the drift check. Not hex, so no key can be mistaken for it.
UNKNOWN_CLIENT = "unknown"

# -- tables ------------------------------------------------------------------------------
_json_metadata = MetaData()
samples_table = Table(  # the layout of stores created before the columnar one
    SAMPLES_TABLE,
    _json_metadata,
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
    # The caller's key (client_key): NULL in rows stored before it was kept.
    Column("client", String(CLIENT_KEY_CHARS), nullable=True),
    Index(f"ix_{SAMPLES_TABLE}_ts", "ts_us"),
    Index(f"ix_{SAMPLES_TABLE}_request", "request_id"),
)


def _columnar_table(metadata: MetaData, dialect: str) -> Table:
    """The columnar samples table; on PostgreSQL partitioned by range of event time
    (a partition's key must be in its primary key, hence ``(id, ts_us)``)."""
    if dialect == "postgresql":
        keys = [
            Column("id", BigInteger, primary_key=True, autoincrement=True),
            Column("ts_us", BigInteger, primary_key=True, autoincrement=False),
        ]
        options = {"postgresql_partition_by": "RANGE (ts_us)"}
    else:
        keys = [
            Column("id", Integer, primary_key=True),
            Column("ts_us", BigInteger, nullable=False),
        ]
        options = {}
    return Table(
        SAMPLES_TABLE,
        metadata,
        *keys,
        Column("received_us", BigInteger, nullable=False),
        Column("model_name", String(256), nullable=False),
        Column("model_version", String(64), nullable=False),
        Column("request_id", String(128), nullable=False),
        Column("record_index", Integer, nullable=False),
        Column("schema_id", Integer, nullable=False),
        Column("numbers", LargeBinary, nullable=False),  # float64 LE, the schema's numbers
        Column("others", Text),  # JSON list of the schema's other values, or NULL
        Column("prediction", Float, nullable=False),  # P(class 1)
        Column("predicted_class", Integer, nullable=False),
        Column("predicted_label", String(256), nullable=True),  # multiclass only
        # The share of requests the service logged when it stored this one
        # (serving.sample_fraction): 1/fraction requests stand behind each row.
        Column("sample_fraction", Float, nullable=False),
        # The caller's key (client_key): NULL in rows stored before it was kept.
        Column("client", String(CLIENT_KEY_CHARS), nullable=True),
        Index(f"ix_{SAMPLES_TABLE}_ts", "ts_us", "id"),
        Index(f"ix_{SAMPLES_TABLE}_request", "request_id"),
        **options,
    )


_shared_metadata = MetaData()
schemas_table = Table(
    SCHEMAS_TABLE,
    _shared_metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("digest", String(64), nullable=False, unique=True),  # sha256 of `fields`
    Column("fields", Text, nullable=False),  # JSON [[name, kind], ...]
)
leases_table = Table(
    LEASES_TABLE,
    _shared_metadata,
    Column("id", String(32), primary_key=True),
    Column("start_us", BigInteger, nullable=False),
    Column("end_us", BigInteger, nullable=False),
    Column("expires_us", BigInteger, nullable=False),
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
        features: The record as received (field -> number, or a string for a
            categorical field).
        prediction: binary: P(class 1); multiclass: the top class's probability;
            regression: the predicted value.
        predicted_class: binary: 0 or 1; multiclass: the class's index into the
            version's classes; regression: -1.
        received_at: When the service received it (default: ``timestamp``).
        predicted_label: multiclass: the predicted class's label; None otherwise.
        sample_fraction: The share of requests the service logs
            (``serving.sample_fraction``) when it stored this one.
        client: The caller's key (:meth:`RequestSampling.client_key`), or None.
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
    sample_fraction: float = 1.0
    client: str | None = None


@dataclass
class ClientMissing:
    """One client's rows in a window and its missing values per feature
    (:meth:`SqlSampleStore.missing_by_client`)."""

    client: str
    rows: int = 0
    missing: dict[str, int] = field(default_factory=dict)


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


@dataclass(frozen=True)
class WindowStats:
    """How many samples a window holds, and how many requests stand behind them.

    Attributes:
        rows: Samples stored in the window.
        estimated_records: Records served in the window, estimated as the sum of
            ``1 / sample_fraction`` over its samples (``rows`` when every one was kept).
        min_fraction / max_fraction: The sampling fractions in force (1.0 when none).
    """

    rows: int
    estimated_records: float
    min_fraction: float = 1.0
    max_fraction: float = 1.0


@dataclass(frozen=True)
class PurgeResult:
    """What one retention pass removed, and what it kept because it was protected."""

    cutoff: pd.Timestamp
    deleted_rows: int = 0
    dropped_partitions: list[str] = field(default_factory=list)
    kept_partitions: list[str] = field(default_factory=list)  # old but protected
    busy_partitions: list[str] = field(default_factory=list)  # old, locked by a reader now
    protected: list[tuple[str, str]] = field(default_factory=list)
    deleted_labels: int = 0  # labels whose sample went (stores.labels, jobs.retention)
    traffic_deleted_rows: int = 0  # rejected records, overflow minutes, requests log

    def to_dict(self) -> dict:
        return {
            "cutoff": self.cutoff.isoformat(),
            "deleted_rows": self.deleted_rows,
            "deleted_labels": self.deleted_labels,
            "traffic_deleted_rows": self.traffic_deleted_rows,
            "dropped_partitions": list(self.dropped_partitions),
            "kept_partitions": list(self.kept_partitions),
            "busy_partitions": list(self.busy_partitions),
            "protected": [list(p) for p in self.protected],
        }


def to_utc(moment: object) -> pd.Timestamp:
    """A datetime, pandas Timestamp or ISO string as a UTC Timestamp (naive = UTC)."""
    stamp = pd.Timestamp(moment)
    if stamp is pd.NaT:
        raise ValueError(f"not a time: {moment!r}")
    return stamp.tz_localize("UTC") if stamp.tzinfo is None else stamp.tz_convert("UTC")


def _to_us(moment: object) -> int:
    return to_utc(moment).value // 1000


def storable_time(moment: object) -> pd.Timestamp:
    """``moment`` as a UTC Timestamp, refused (ValueError) outside the times the store
    holds. Also the bound of every time a user gives a job (a window's end, retention's
    "now"): pandas parses ``9999-12-31`` at second resolution, but the first nanosecond
    arithmetic on it (a window's start, a cutoff) overflows."""
    stamp = to_utc(moment)
    if not EARLIEST_TIMESTAMP <= stamp < LATEST_TIMESTAMP:
        raise ValueError(
            f"time {moment!r} outside [{EARLIEST_TIMESTAMP:%Y-%m-%d}, "
            f"{LATEST_TIMESTAMP:%Y-%m-%d}), the times the sample store holds"
        )
    return stamp.as_unit("ns")


def time_before(moment: pd.Timestamp, length: pd.Timedelta) -> pd.Timestamp:
    """``moment - length``, but never before :data:`EARLIEST_TIMESTAMP`: the store holds
    nothing earlier, and pandas holds little earlier (a 366-day window ending in
    February 1678 would start before 1677-09-21, an OutOfBoundsDatetime)."""
    earliest = pd.Timestamp(EARLIEST_TIMESTAMP)
    # earliest + length, not moment - earliest: that difference may exceed a Timedelta.
    return moment - length if moment >= earliest + length else earliest


def _storable_us(moment: datetime) -> int:
    return storable_time(moment).value // 1000


def _json_value(value):
    # JSON has no NaN/Infinity; store them as null (the validator rejects them anyway).
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


# -- sampling (serving.sample_fraction) -----------------------------------------------
#
# Which requests are logged is decided by a *keyed* hash of the request id. The id is
# the client's own (X-Request-ID): with a hash anyone can compute, a client could pick
# ids that are never logged and keep its traffic out of every drift check. The key is
# a random secret made by the first process that opens the sample store and kept in
# its database, so every process that writes or joins this store (replicas, restarts,
# `driftgate labels load`) decides alike, and no operator has to distribute it. Whoever
# can read the key can read the samples themselves; it is never logged or printed.
SAMPLING_KEY_TABLE = "driftgate_sampling_key"
sampling_key_table = single_value_table(SAMPLING_KEY_TABLE, "secret")  # 32 bytes, hex


class RequestSampling:
    """Whether a request is logged at ``fraction``: HMAC-SHA256 of its id under the
    store's key, read as a number in [0, 1), below ``fraction``.

    The same id gets the same answer in every process sharing the store (a retried
    request is logged or skipped alike), a smaller fraction keeps a subset of a larger
    one, and without the key no client can tell which of its ids will be logged.
    """

    __slots__ = ("_keyed", "_threshold", "fraction")

    def __init__(self, key: bytes, fraction: float) -> None:
        if len(key) < 16:
            raise ValueError("a sampling key needs at least 16 bytes")
        self.fraction = float(fraction)
        self._keyed = hmac.new(key, digestmod=hashlib.sha256)  # copied per id: no re-keying
        self._threshold = self.fraction * 2.0**64

    def keeps(self, request_id: str) -> bool:
        if self.fraction >= 1.0:
            return True
        keyed = self._keyed.copy()
        keyed.update(request_id.encode("utf-8", "surrogatepass"))
        return int.from_bytes(keyed.digest()[:8], "big") < self._threshold

    def client_key(self, identity: str) -> str:
        """The caller's short opaque key: HMAC-SHA256 of ``identity`` (a peer address or
        a header's value) under the store's key, as CLIENT_KEY_CHARS hex characters.
        Stored instead of the address (privacy); the same caller gets the same key in
        every process sharing the store, and without the key nobody can map a key back
        to an address by hashing candidates. Domain-separated from the sampling hash,
        so a key says nothing about which request ids are logged."""
        keyed = self._keyed.copy()
        keyed.update(b"client\0" + identity.encode("utf-8", "surrogatepass"))
        return keyed.hexdigest()[:CLIENT_KEY_CHARS]

    def __repr__(self) -> str:  # never the key
        return f"RequestSampling(fraction={self.fraction:g})"


# -- the columnar encoding -----------------------------------------------------------------
_STRUCTS: dict[int, struct.Struct] = {}
_PLAIN_NUMBERS = (float, int)


def _struct(count: int) -> struct.Struct:
    packer = _STRUCTS.get(count)
    if packer is None:
        packer = _STRUCTS[count] = struct.Struct(f"<{count}d")
    return packer


def _encode(features: Mapping) -> tuple[tuple, bytes, str | None]:
    """(schema key, numbers blob, others JSON) of one sample's features.

    A number (or None, or a non-finite float: stored as null, i.e. NaN) goes to the
    float64 blob; anything else — a categorical string, a boolean — is kept as it came,
    in JSON, so a string is read back as the same string.
    """
    key, numbers, others = [], [], []
    for name, value in features.items():
        kind = type(value)
        if kind in _PLAIN_NUMBERS or value is None:
            numbers.append(float(value) if value is not None else math.nan)
            key.append((name, NUMBER))
        elif isinstance(value, (float, int)) and not isinstance(value, bool):  # numpy scalars
            numbers.append(float(value))
            key.append((name, NUMBER))
        else:
            others.append(_json_value(value))
            key.append((name, OTHER))
    numbers = [v if math.isfinite(v) else math.nan for v in numbers]
    blob = _struct(len(numbers)).pack(*numbers)
    return tuple(key), blob, (json.dumps(others, allow_nan=False) if others else None)


def _decode(
    schema_ids: Sequence[int],
    numbers: Sequence[bytes],
    others: Sequence[str | None],
    schemas: Mapping[int, tuple],
) -> dict[str, np.ndarray]:
    """Feature columns (union, in order of first appearance) of rows in columnar layout."""
    n = len(schema_ids)
    ids = np.asarray(schema_ids, dtype=np.int64)
    distinct, first = np.unique(ids, return_index=True)
    order = [int(distinct[i]) for i in np.argsort(first)]
    single = len(order) == 1
    columns: dict[str, np.ndarray] = {}
    for schema_id in order:
        fields = schemas[schema_id]
        rows = None if single else np.flatnonzero(ids == schema_id)
        numeric = [name for name, kind in fields if kind == NUMBER]
        other = [name for name, kind in fields if kind == OTHER]
        if numeric:
            blob = b"".join(numbers) if single else b"".join([numbers[i] for i in rows])
            matrix = np.frombuffer(blob, dtype="<f8").reshape(-1, len(numeric))
            for j, name in enumerate(numeric):
                if single:
                    columns[name] = matrix[:, j].copy()
                    continue
                column = columns.get(name)
                if column is None:
                    column = columns[name] = np.full(n, np.nan)
                column[rows] = matrix[:, j]
        if other:
            taken = others if single else [others[i] for i in rows]
            values = [json.loads(item) for item in taken]
            for j, name in enumerate(other):
                column = columns.get(name)
                if column is None:
                    column = columns[name] = np.full(n, np.nan, dtype=object)
                elif column.dtype != object:
                    column = columns[name] = column.astype(object)
                picked = [row[j] for row in values]
                if single:
                    column[:] = picked
                else:
                    column[rows] = picked
    return columns


def _empty_window() -> pd.DataFrame:
    frame = pd.DataFrame({name: pd.Series(dtype=object) for name in META_COLUMNS + OUTPUT_COLUMNS})
    for name in (TIMESTAMP, "received_at"):
        frame[name] = pd.to_datetime(frame[name], utc=True)
    return frame


# Columns added after the table's first release: nullable, added to an older store when
# it is opened (the rows it already holds read back as NULL).
_ADDED_COLUMNS = {
    "predicted_label": "VARCHAR(256)",
    # On a partitioned PostgreSQL table the parent's ADD COLUMN reaches every partition.
    "client": f"VARCHAR({CLIENT_KEY_CHARS})",
}
_ADDED_REJECTED_COLUMNS = {"client": f"VARCHAR({CLIENT_KEY_CHARS})"}


def _add_missing_columns(engine, url: str) -> None:
    from sqlalchemy import inspect

    added = {SAMPLES_TABLE: _ADDED_COLUMNS, REJECTED_TABLE: _ADDED_REJECTED_COLUMNS}
    for table, columns in added.items():
        present = {c["name"] for c in inspect(engine).get_columns(table)}
        for name, sql_type in columns.items():
            if name in present:
                continue
            try:
                with engine.begin() as connection:
                    connection.execute(text(f"ALTER TABLE {table} ADD COLUMN {name} {sql_type}"))
            except Exception as exc:  # another opener may have added it first
                now = {c["name"] for c in inspect(engine).get_columns(table)}
                if name not in now:
                    raise StoreError(
                        f"cannot add column {name} to {table} of sample store {redact(url)}: {exc}"
                    ) from exc


def _frame(meta: dict | None, features: pd.DataFrame, outputs: dict | None) -> pd.DataFrame:
    clashing = [c for c in features.columns if c in META_COLUMNS + OUTPUT_COLUMNS]
    if clashing:  # renaming copies: only when needed
        features = features.rename(columns={c: f"feature.{c}" for c in clashing})
    if meta is None:
        return features
    return pd.concat([pd.DataFrame(meta), features, pd.DataFrame(outputs)], axis=1)


@contextlib.contextmanager
def _gc_paused() -> Iterator[None]:
    """No cyclic garbage collection while rows are fetched and decoded.

    Fetching creates a tuple per row; the collector, triggered by every few hundred
    new tuples, then walks every live object, which tripled the time of a streamed
    read (measured: 1.9 s vs 0.67 s for 200k rows). The rows hold no cycles and are
    freed by reference counting; the previous state is restored after each fetch,
    so the consumer of a chunk runs with the collector as it was.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _day_name(day: int) -> str:
    return f"{SAMPLES_TABLE}_p{(_EPOCH + timedelta(days=day)):%Y%m%d}"


def _overlaps(low: int, high: int, ranges: Sequence[tuple[int, int]]) -> bool:
    return any(low < end and start < high for start, end in ranges)


@dataclass
class _Piece:
    rows: int
    features: dict[str, np.ndarray]
    meta: dict | None


def _assemble(pieces: list[_Piece]) -> pd.DataFrame:
    """One chunk frame from its pieces, copying each value once: numeric features go
    straight into one preallocated float64 matrix that the frame then uses as is."""
    n = sum(piece.rows for piece in pieces)
    names: dict[str, bool] = {}  # feature -> numeric in every piece that has it
    for piece in pieces:
        for name, column in piece.features.items():
            names[name] = names.get(name, True) and column.dtype != object
    numeric = [name for name, is_number in names.items() if is_number]
    matrix = np.full((n, len(numeric)), np.nan)
    objects = {name: np.full(n, np.nan, dtype=object) for name, ok in names.items() if not ok}
    offset = 0
    position = {name: j for j, name in enumerate(numeric)}
    for piece in pieces:
        stop = offset + piece.rows
        for name, column in piece.features.items():
            if name in position:
                matrix[offset:stop, position[name]] = column
            else:
                objects[name][offset:stop] = column
        piece.features.clear()  # each value is held once: in the chunk, not also here
        offset = stop
    if objects:
        data = {name: matrix[:, position[name]] if name in position else objects[name]
                for name in names}  # fmt: skip
        features = pd.DataFrame(data)
    else:
        features = pd.DataFrame(matrix, columns=numeric, copy=False)
    if pieces[0].meta is None:
        return _frame(None, features, None)

    def joined(key):
        parts = [piece.meta[key] for piece in pieces]
        if isinstance(parts[0], np.ndarray):
            return np.concatenate(parts)
        return [value for part in parts for value in part]

    meta = {
        TIMESTAMP: pd.to_datetime(joined("ts_us"), unit="us", utc=True),
        "received_at": pd.to_datetime(joined("received_us"), unit="us", utc=True),
        **{key: joined(key) for key in ("model_name", "model_version", "request_id")},
        "record_index": joined("record_index"),
    }
    outputs = {key: joined(key) for key in OUTPUT_COLUMNS}
    return _frame(meta, features, outputs)


class _ChunkBuilder:
    """One chunk of iter_window, built from the fetches that make it up.

    The streamed path (columnar layout, features only, a known chunk size) decodes
    each fetch of rows of one all-numeric schema straight into the chunk's own
    preallocated float64 matrix, which the chunk frame then uses as is: one copy of
    each value, never fetched pieces and the assembled chunk side by side (that
    doubled the chunk while it was built: the streamed peak of sample_store_bench was
    2 chunks over its bound). Any other fetch (another schema, categorical values, the
    JSON layout, meta columns) goes through :meth:`SqlSampleStore._piece` and
    :func:`_assemble`, as do the rows already in the matrix when one arrives.
    """

    def __init__(self, store: SqlSampleStore, names: list[str], capacity: int | None) -> None:
        self.store = store
        self.names = names
        self.rows = 0
        # Only the streamed drift check's read qualifies; read_window (one chunk of
        # unknown size) and reads with meta columns take the general path.
        self.direct = bool(capacity) and store.layout == LAYOUT_COLUMNAR and names == [
            "schema_id", "numbers", "others"
        ]  # fmt: skip
        self.capacity = capacity or 0
        self.matrix: np.ndarray | None = None
        self.numeric: list[str] = []
        self.schema_id: int | None = None
        self.filled = 0
        self.pieces: list[_Piece] = []

    def add(self, rows: list[tuple]) -> None:
        schema_id = self._direct_schema(rows)
        if schema_id is None:
            self._flush()
            self.pieces.append(self.store._piece(rows, self.names))
        else:
            if self.matrix is None:
                self.schema_id = schema_id
                self.numeric = [name for name, _ in self.store._schemas[schema_id]]
                self.matrix = np.empty((self.capacity, len(self.numeric)))
            values = np.frombuffer(b"".join([row[1] for row in rows]), dtype="<f8")
            stop = self.filled + len(rows)
            self.matrix[self.filled : stop] = values.reshape(len(rows), len(self.numeric))
            self.filled = stop
        self.rows += len(rows)

    def _direct_schema(self, rows: list[tuple]) -> int | None:
        """The schema id when ``rows`` can go straight into the matrix, else None."""
        if not self.direct or self.pieces:
            return None
        ids = {row[0] for row in rows}
        if len(ids) != 1:
            return None
        (schema_id,) = ids
        if schema_id not in self.store._schemas:
            self.store._load_schemas()
        fields = self.store._schemas[schema_id]
        if self.matrix is not None and schema_id != self.schema_id:
            return None
        if not fields or any(kind != NUMBER for _, kind in fields):
            return None
        return schema_id

    def _flush(self) -> None:
        """The matrix's rows as a piece, so that the general path can take over."""
        if self.matrix is not None and self.filled:
            used = self.matrix[: self.filled]
            features = {name: used[:, j] for j, name in enumerate(self.numeric)}
            self.pieces.append(_Piece(self.filled, features, None))
        self.matrix, self.filled = None, 0

    def frame(self) -> pd.DataFrame | None:
        if self.pieces:
            self._flush()
            return _assemble(self.pieces)
        if self.matrix is None:
            return None
        matrix = self.matrix if self.filled == self.capacity else self.matrix[: self.filled]
        self.matrix = None
        return _frame(None, pd.DataFrame(matrix, columns=self.numeric, copy=False), None)


class SqlSampleStore:
    """Samples in SQLite (default) or PostgreSQL.

    Args:
        url: ``sqlite:///PATH`` or ``postgresql://USER@HOST/DB``.
        sqlite_synchronous: ``FULL`` (survives power loss) or ``NORMAL`` (survives a
            killed process); see :mod:`driftgate.stores._sql`.

    Attributes:
        layout: ``columnar`` (stores created by this version) or ``json`` (created
            before; still written and read).
        partitioned: True on PostgreSQL with the columnar layout (daily partitions).
    """

    def __init__(self, url: str, *, sqlite_synchronous: str = "FULL") -> None:
        self.url = url
        self.engine = create_store_engine(url, sqlite_synchronous=sqlite_synchronous)
        self.dialect = self.engine.dialect.name
        try:
            existing = inspect(self.engine)
            columns = (
                {c["name"] for c in existing.get_columns(SAMPLES_TABLE)}
                if existing.has_table(SAMPLES_TABLE)
                else set()
            )
        except Exception as exc:  # unreachable server, not a database
            raise StoreError(f"cannot open sample store {redact(url)}: {exc}") from exc
        self.layout = LAYOUT_JSON if "features" in columns else LAYOUT_COLUMNAR
        if self.layout == LAYOUT_JSON:
            self.table, metadata = samples_table, _json_metadata
        else:
            metadata = MetaData()
            self.table = _columnar_table(metadata, self.dialect)
        create_tables(self.engine, metadata, url, "sample")
        create_tables(self.engine, _shared_metadata, url, "sample")
        create_tables(self.engine, _traffic_metadata, url, "sample")  # rejected, requests
        _add_missing_columns(self.engine, url)
        self.partitioned = self.dialect == "postgresql" and self._is_partitioned()
        self.store_id = ensure_store_id(self.engine, url, "sample")
        self._sampling_key = bytes.fromhex(
            ensure_single_value(
                self.engine, url, "sample", sampling_key_table, lambda: secrets.token_hex(32)
            )
        )
        path = sqlite_path(self.engine)
        self.file = FileIdentity.of(path) if path is not None else None
        self._probe = WriteProbe(url, sqlite_synchronous=sqlite_synchronous)
        self._schema_ids: dict[tuple, int] = {}
        self._schemas: dict[int, tuple] = {}
        self._partitions: set[int] = set()
        # Built once: constructing a statement per batch costs more than running it.
        self._known_request_ids = (
            select(self.table.c.request_id)
            .where(self.table.c.request_id.in_(bindparam("ids", expanding=True)))
            .distinct()
        )

    def __repr__(self) -> str:
        return f"SqlSampleStore({redact(self.url)!r})"

    def sampling(self, fraction: float) -> RequestSampling:
        """Which requests are logged at ``fraction``, under this store's sampling key."""
        return RequestSampling(self._sampling_key, fraction)

    def _is_partitioned(self) -> bool:
        with self.engine.connect() as connection:
            kind = connection.execute(
                text("SELECT relkind FROM pg_class WHERE relname = :name"), {"name": SAMPLES_TABLE}
            ).scalar()
        return kind == "p"

    # -- writing ---------------------------------------------------------------------------
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
        # A writer batch may hold rejected records and overflow counts too (issue 16).
        samples, traffic = _split_batch(self, samples)
        rows = self._rows(samples) if samples else []
        try:
            try:
                self._insert(rows, traffic, refuse_known_request_ids)
            except IntegrityError as exc:
                # Another process's retention pass dropped a daily partition that this
                # process created and remembers: forget them all, create, insert again.
                if not self.partitioned or "no partition" not in str(exc.orig):
                    raise
                self._partitions.clear()
                self._insert(rows, traffic, refuse_known_request_ids)
        except OperationalError:
            # A SQLite connection opened while the file was read-only stays read-only
            # after the file is writable again: start over with fresh connections.
            self.engine.dispose()
            raise
        # Deleted during the commit: the rows are in the unlinked file, lost with it.
        self._raise_if_replaced()
        return len(rows) + len(traffic["rejected"])

    def _insert(self, rows: list[dict], traffic: dict, refuse_known_request_ids: bool) -> None:
        """One transaction: the sample rows and the batch's traffic (see :meth:`append`)."""
        if self.partitioned and rows:
            self._ensure_partitions({row["ts_us"] // _US_PER_DAY for row in rows})
        # BEGIN IMMEDIATE on SQLite: a deferred transaction that reads first (the
        # identity and id checks) fails at once, not after the busy timeout, when
        # another writer commits before its INSERT.
        with write_transaction(self.engine) as connection:
            if problem := identity_problem(connection, self.store_id, None):
                raise StoreReplaced(f"sample store {redact(self.url)}: {problem}")
            if refuse_known_request_ids and rows:
                ids = list({r["request_id"] for r in rows})
                known = set(connection.execute(self._known_request_ids, {"ids": ids}).scalars())
                if known:
                    raise DuplicateRequestIds(known)
            if rows:
                connection.execute(self.table.insert(), rows)
            _insert_traffic(self, connection, traffic)

    def _rows(self, samples: Sequence[Sample]) -> list[dict]:
        rows = [
            {
                "ts_us": _storable_us(s.timestamp),
                "received_us": _storable_us(s.received_at or s.timestamp),
                "model_name": s.model_name,
                "model_version": s.model_version,
                "request_id": s.request_id,
                "record_index": s.record_index,
                "prediction": float(s.prediction),
                "predicted_class": int(s.predicted_class),
                "predicted_label": s.predicted_label,
                "client": s.client,
            }
            for s in samples
        ]
        if self.layout == LAYOUT_JSON:
            for row, s in zip(rows, samples, strict=True):
                row["features"] = json.dumps(
                    {k: _json_value(v) for k, v in s.features.items()}, allow_nan=False
                )
            return rows
        encoded = [_encode(s.features) for s in samples]
        unknown = {key for key, _, _ in encoded if key not in self._schema_ids}
        if unknown:
            self._register_schemas(unknown)
        for row, s, (key, blob, others) in zip(rows, samples, encoded, strict=True):
            row["schema_id"] = self._schema_ids[key]
            row["numbers"] = blob
            row["others"] = others
            row["sample_fraction"] = float(s.sample_fraction)
        return rows

    def _register_schemas(self, keys: set[tuple]) -> None:
        """Give each new field list its schema id (its own committed transaction: a
        schema without samples is harmless, and concurrent writers agree by digest)."""
        texts = {key: json.dumps([list(item) for item in key]) for key in keys}
        digests = {key: hashlib.sha256(t.encode()).hexdigest() for key, t in texts.items()}
        insert = (postgresql.insert if self.dialect == "postgresql" else sqlite.insert)(
            schemas_table
        )
        with write_transaction(self.engine) as connection:
            for key in keys:
                connection.execute(
                    insert.values(digest=digests[key], fields=texts[key]).on_conflict_do_nothing(
                        index_elements=["digest"]
                    )
                )
        with self.engine.connect() as connection:
            found = dict(
                connection.execute(
                    select(schemas_table.c.digest, schemas_table.c.id).where(
                        schemas_table.c.digest.in_(list(digests.values()))
                    )
                ).all()
            )
        for key in keys:
            self._schema_ids[key] = found[digests[key]]
            self._schemas[found[digests[key]]] = key

    def _ensure_partitions(self, days: set[int]) -> None:
        """Create the daily partitions of ``days`` that this process has not seen yet."""
        missing = days - self._partitions
        for day in sorted(missing):
            low, high = day * _US_PER_DAY, (day + 1) * _US_PER_DAY
            statement = (
                f'CREATE TABLE IF NOT EXISTS "{_day_name(day)}" PARTITION OF {SAMPLES_TABLE} '
                f"FOR VALUES FROM ({low}) TO ({high})"
            )
            try:
                with self.engine.begin() as connection:
                    connection.exec_driver_sql(statement)
            except (IntegrityError, ProgrammingError) as exc:
                # Another process created it between our check and our create.
                if "already exists" not in str(exc.orig) and "duplicate" not in str(exc.orig):
                    raise
            self._partitions.add(day)

    def _raise_if_replaced(self) -> None:
        if self.file is not None and (problem := self.file.problem()):
            raise StoreReplaced(f"sample store {redact(self.url)}: {problem}")

    def write_problem(self) -> str | None:
        """Why the store cannot take samples right now (read-only, locked, deleted,
        replaced, unreachable, disk full), or None. Commits one probe row on a
        connection of its own (see :class:`~driftgate.stores._sql.WriteProbe`)."""
        return self._probe.check(self.engine, self.store_id, self.file)

    # -- reading ---------------------------------------------------------------------------
    def read_window(
        self, start: object, end: object, model_version: str | None = None, *, every: int = 1
    ) -> pd.DataFrame:
        """Samples with ``start <= timestamp < end`` (optionally of one version) as a frame.

        Columns: timestamp, received_at (UTC), model_name, model_version, request_id,
        record_index, one column per feature (union over the window, in order of first
        appearance), prediction, predicted_class, predicted_label (see :class:`Sample`).
        ``every`` > 1 keeps only the samples whose row id is a multiple of it (a
        systematic sample of a window too large to hold). For large windows use
        :meth:`iter_window`.
        """
        chunks = list(
            self.iter_window(start, end, model_version=model_version, chunk_rows=None, every=every)
        )
        if not chunks:
            return _empty_window()
        return chunks[0] if len(chunks) == 1 else pd.concat(chunks, ignore_index=True)

    def iter_window(
        self,
        start: object,
        end: object,
        *,
        chunk_rows: int | None = DEFAULT_CHUNK_ROWS,
        model_version: str | None = None,
        features_only: bool = False,
        every: int = 1,
        without_client: str | None = None,
    ) -> Iterator[pd.DataFrame]:
        """The window of :meth:`read_window` as frames of at most ``chunk_rows`` rows,
        in time order, never the whole window in memory (``None``: one chunk).

        One statement reads the whole window, so the chunks are one consistent
        snapshot: a server-side cursor on PostgreSQL, ``fetchmany`` on SQLite.
        ``features_only``: the feature columns only (what a drift check summarises).
        Feature columns are the union over each chunk: a feature that only some chunks
        have is absent from the others. ``without_client``: every row but that client's
        (a key, or UNKNOWN_CLIENT for the rows stored without one).
        """
        table = self.table
        columnar = self.layout == LAYOUT_COLUMNAR
        feature_columns = ["schema_id", "numbers", "others"] if columnar else ["features"]
        meta = ["ts_us", "received_us", "model_name", "model_version", "request_id"]
        names = (
            feature_columns
            if features_only
            else [*meta, "record_index", *feature_columns, *OUTPUT_COLUMNS]
        )
        mark = "?" if self.dialect == "sqlite" else "%s"
        where = f"ts_us >= {mark} AND ts_us < {mark}"
        params: list = [_to_us(start), _to_us(end)]
        if model_version is not None:
            where += f" AND model_version = {mark}"
            params.append(str(model_version))
        if every > 1:
            modulo = "%" if self.dialect == "sqlite" else "%%"  # psycopg: % is a placeholder
            where += f" AND id {modulo} {int(every)} = 0"
        if without_client == UNKNOWN_CLIENT:
            where += " AND client IS NOT NULL"
        elif without_client is not None:
            # NULL <> key is NULL, not true: the unknown client's rows are kept explicitly.
            where += f" AND (client IS NULL OR client <> {mark})"
            params.append(str(without_client))
        sql = f"SELECT {', '.join(names)} FROM {table.name} WHERE {where} ORDER BY ts_us, id"
        if columnar:
            self._load_schemas()  # every schema a row of the snapshot below can name
        with self.engine.connect() as connection:
            raw = connection.connection.dbapi_connection
            if self.dialect == "postgresql":
                cursor = raw.cursor(name=f"driftgate_window_{uuid.uuid4().hex[:12]}")
                cursor.itersize = FETCH_ROWS
                cursor.execute(sql, params, binary=True)
            else:
                cursor = raw.cursor()
                cursor.execute(sql, params)
            try:
                done = False
                while not done:
                    with _gc_paused():  # one chunk's fetches and decoding
                        builder = _ChunkBuilder(self, names, chunk_rows)
                        while not chunk_rows or builder.rows < chunk_rows:
                            wanted = FETCH_ROWS
                            if chunk_rows:
                                wanted = min(FETCH_ROWS, chunk_rows - builder.rows)
                            rows = cursor.fetchmany(wanted)
                            if not rows:
                                done = True
                                break
                            builder.add(rows)
                            del rows
                        chunk = builder.frame()
                        del builder
                    if chunk is not None:
                        yield chunk
                        del chunk
            finally:
                cursor.close()

    def _piece(self, rows: list[tuple], names: list[str]) -> _Piece:
        """A few thousand fetched rows decoded to arrays (the rows are dropped after)."""
        columns = {name: [row[i] for row in rows] for i, name in enumerate(names)}
        if self.layout == LAYOUT_COLUMNAR:
            if not set(columns["schema_id"]) <= self._schemas.keys():
                self._load_schemas()
            features = _decode(
                columns["schema_id"], columns["numbers"], columns["others"], self._schemas
            )
        else:
            records = pd.DataFrame.from_records(
                json.loads("[" + ",".join(columns["features"]) + "]")
            )
            features = {
                str(name): (
                    records[name].to_numpy(dtype=float)
                    if records[name].dtype.kind in "fiu"
                    else records[name].to_numpy(dtype=object)
                )
                for name in records.columns
            }
        meta = None
        if "ts_us" in columns:
            meta = {
                "ts_us": np.asarray(columns["ts_us"], dtype=np.int64),
                "received_us": np.asarray(columns["received_us"], dtype=np.int64),
                "model_name": columns["model_name"],
                "model_version": columns["model_version"],
                "request_id": columns["request_id"],
                "record_index": np.asarray(columns["record_index"], dtype=np.int64),
                "prediction": np.asarray(columns["prediction"], dtype=float),
                "predicted_class": np.asarray(columns["predicted_class"], dtype=np.int64),
                "predicted_label": columns["predicted_label"],
            }
        return _Piece(len(rows), features, meta)

    def missing_by_client(
        self, start: object, end: object, features: Sequence[str]
    ) -> dict[str, ClientMissing]:
        """Per client of ``[start, end)`` (its key, or UNKNOWN_CLIENT for rows stored
        without one): its rows and its missing values (NaN / None, as the drift
        statistics count them) in each of ``features``; a feature a row's schema lacks
        is missing. Streamed: decoded a fetch at a time, only the tallies are kept. The
        missing values are inside each row's binary column, so SQL cannot count them."""
        names = (
            ["schema_id", "numbers", "others"] if self.layout == LAYOUT_COLUMNAR else ["features"]
        )
        mark = "?" if self.dialect == "sqlite" else "%s"
        sql = (
            f"SELECT {', '.join(names)}, client FROM {self.table.name} "
            f"WHERE ts_us >= {mark} AND ts_us < {mark}"
        )
        tallies: dict[str, ClientMissing] = {}
        features = list(features)
        if self.layout == LAYOUT_COLUMNAR:
            self._load_schemas()
        with self.engine.connect() as connection:
            cursor = connection.connection.dbapi_connection.cursor()
            cursor.execute(sql, [_to_us(start), _to_us(end)])
            try:
                while rows := cursor.fetchmany(FETCH_ROWS):
                    with _gc_paused():
                        piece = self._piece(rows, names)  # the trailing client is not read
                    clients = pd.Series([row[-1] or UNKNOWN_CLIENT for row in rows])
                    missing = pd.DataFrame(
                        {
                            name: pd.isna(piece.features[name])
                            if name in piece.features
                            else np.ones(len(rows), dtype=bool)
                            for name in features
                        }
                    )
                    grouped = missing.groupby(clients.to_numpy()).sum()
                    sizes = clients.value_counts()
                    for client, row in grouped.iterrows():
                        tally = tallies.setdefault(client, ClientMissing(client))
                        tally.rows += int(sizes[client])
                        for name in features:
                            tally.missing[name] = tally.missing.get(name, 0) + int(row[name])
            finally:
                cursor.close()
        return tallies

    def _load_schemas(self) -> None:
        """Every schema of the store (a short table: one row per distinct field list)."""
        with self.engine.connect() as connection:
            rows = connection.execute(select(schemas_table.c.id, schemas_table.c.fields)).all()
        for schema_id, fields in rows:
            key = tuple((name, kind) for name, kind in json.loads(fields))
            self._schemas[int(schema_id)] = key
            self._schema_ids[key] = int(schema_id)

    def window_stats(
        self, start: object, end: object, model_version: str | None = None
    ) -> WindowStats:
        """Rows of the window and the records they stand for (see :class:`WindowStats`)."""
        table = self.table
        if self.layout == LAYOUT_COLUMNAR:
            fraction = table.c.sample_fraction
            measures = [
                func.count(),
                func.sum(1.0 / fraction),
                func.min(fraction),
                func.max(fraction),
            ]
        else:
            measures = [func.count()]
        query = select(*measures).where(table.c.ts_us >= _to_us(start), table.c.ts_us < _to_us(end))
        if model_version is not None:
            query = query.where(table.c.model_version == str(model_version))
        with self.engine.connect() as connection:
            found = connection.execute(query).one()
        rows = int(found[0])
        if len(found) == 1 or not rows:
            return WindowStats(rows=rows, estimated_records=float(rows))
        return WindowStats(rows, float(found[1]), float(found[2]), float(found[3]))

    # -- leases and retention --------------------------------------------------------------
    def lease(self, start: object, end: object, seconds: float = LEASE_SECONDS) -> str:
        """Protect ``[start, end)`` from retention while a drift check judges it; returns
        the lease id for :meth:`release`. A lease ends by itself after ``seconds``."""
        lease_id = uuid.uuid4().hex
        with self._lease_transaction() as connection:
            connection.execute(
                leases_table.insert().values(
                    id=lease_id,
                    start_us=_to_us(start),
                    end_us=_to_us(end),
                    expires_us=int((time.time() + seconds) * 1e6),
                )
            )
        return lease_id

    def renew(self, lease_id: str, seconds: float = LEASE_SECONDS) -> None:
        with self._lease_transaction() as connection:
            connection.execute(
                leases_table.update()
                .where(leases_table.c.id == lease_id)
                .values(expires_us=int((time.time() + seconds) * 1e6))
            )

    def release(self, lease_id: str) -> None:
        with self._lease_transaction() as connection:
            connection.execute(leases_table.delete().where(leases_table.c.id == lease_id))

    def _lease_transaction(self):
        # A lease is taken in a transaction that waits for a running retention pass
        # (which locks the lease table), so a pass never misses a lease taken during it.
        return write_transaction(self.engine)

    def _active_leases(self, connection: Connection) -> list[tuple[int, int]]:
        now_us = int(time.time() * 1e6)
        if self.dialect == "postgresql":
            connection.exec_driver_sql(f"LOCK TABLE {LEASES_TABLE} IN SHARE ROW EXCLUSIVE MODE")
        connection.execute(leases_table.delete().where(leases_table.c.expires_us <= now_us))
        return [
            (int(a), int(b))
            for a, b in connection.execute(select(leases_table.c.start_us, leases_table.c.end_us))
        ]

    def purge(
        self,
        cutoff: object,
        protected: Sequence[tuple[object, object]] = (),
        *,
        batch_rows: int = PURGE_BATCH_ROWS,
    ) -> PurgeResult:
        """Remove samples older than ``cutoff`` (event time), except those inside any
        ``protected`` range or any live lease (a window being judged).

        PostgreSQL (columnar): whole daily partitions whose day ends by ``cutoff`` are
        dropped, unless they overlap a protected range (then they stay whole until a
        later pass) or a reader holds the table for longer than DROP_LOCK_WAIT_MS
        (``busy_partitions``: a later pass drops them). SQLite and older PostgreSQL
        stores: rows are deleted in transactions of ``batch_rows``.
        """
        cutoff = to_utc(cutoff)
        cutoff_us = cutoff.value // 1000
        given = [(_to_us(a), _to_us(b)) for a, b in protected]
        result = PurgeResult(cutoff=cutoff)
        if self.partitioned:
            with self.engine.connect() as connection:
                old = [b for b in self._partition_bounds(connection) if b[2] <= cutoff_us]
            for name, low, high in old:
                # One transaction per partition: a drop holds its parent's exclusive
                # lock until the commit, so the service's inserts wait for one drop, not
                # for the whole pass. The leases are read (and locked) in the same
                # transaction: a reader cannot lease a day between the check and the drop.
                try:
                    with write_transaction(self.engine) as connection:
                        if _overlaps(low, high, given + self._active_leases(connection)):
                            result.kept_partitions.append(name)
                            continue
                        # Behind a long read the drop would queue every insert of the
                        # service: wait briefly; a partition busy now goes in a later pass.
                        connection.exec_driver_sql(f"SET LOCAL lock_timeout = {DROP_LOCK_WAIT_MS}")
                        connection.exec_driver_sql(f'DROP TABLE IF EXISTS "{name}"')
                except OperationalError:
                    result.busy_partitions.append(name)
                    continue
                result.dropped_partitions.append(name)
            self._partitions.clear()
        else:
            deleted = delete_in_batches(
                self.engine,
                lambda connection: self._delete_batch(
                    connection, cutoff_us, given + self._active_leases(connection), batch_rows
                ),
                batch_rows,
            )
            result = PurgeResult(cutoff=cutoff, deleted_rows=deleted)
        result = dataclasses.replace(
            result, traffic_deleted_rows=_purge_traffic(self, cutoff_us, given, batch_rows)
        )
        result.protected.extend(
            (pd.Timestamp(a, unit="us", tz="UTC").isoformat(),
             pd.Timestamp(b, unit="us", tz="UTC").isoformat())
            for a, b in given
        )  # fmt: skip
        return result

    def _delete_batch(
        self, connection: Connection, cutoff_us: int, ranges: list[tuple[int, int]], rows: int
    ) -> int:
        table = self.table
        chosen = select(table.c.id).where(table.c.ts_us < cutoff_us)
        for low, high in ranges:
            chosen = chosen.where((table.c.ts_us < low) | (table.c.ts_us >= high))
        chosen = chosen.limit(rows)
        statement = table.delete().where(table.c.id.in_(chosen.scalar_subquery()))
        return connection.execute(statement).rowcount

    def _partition_bounds(self, connection: Connection) -> list[tuple[str, int, int]]:
        """(name, low, high) of every daily partition, oldest first."""
        names = connection.execute(
            text(
                "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
                "JOIN pg_class p ON p.oid = i.inhparent WHERE p.relname = :parent"
            ),
            {"parent": SAMPLES_TABLE},
        ).scalars()
        bounds = []
        for name in names:
            day = datetime.strptime(name.rsplit("_p", 1)[1], "%Y%m%d").replace(tzinfo=UTC)
            index = (day - _EPOCH) // timedelta(days=1)
            bounds.append((name, index * _US_PER_DAY, (index + 1) * _US_PER_DAY))
        return sorted(bounds, key=lambda b: b[1])

    # -- audits ----------------------------------------------------------------------------
    def count(self) -> int:
        with self.engine.connect() as connection:
            return int(connection.execute(select(func.count()).select_from(self.table)).scalar())

    def request_ids(self) -> set[str]:
        """Every stored request id (for audits and tests)."""
        with self.engine.connect() as connection:
            return set(connection.execute(select(self.table.c.request_id).distinct()).scalars())

    # -- rejected records and requests (issue 16) ------------------------------------------
    def rejected_stats(self, start: object, end: object) -> RejectedStats:
        """Rejected records of ``[start, end)``: stored, dropped by the cap, per rule
        kind and per field (see :class:`RejectedStats`)."""
        return _rejected_stats(self, start, end)

    def iter_rejected(
        self, start: object, end: object, *, chunk_rows: int = DEFAULT_CHUNK_ROWS
    ) -> Iterator[pd.DataFrame]:
        """The window's rejected records in chunks (see :func:`_iter_rejected`)."""
        return _iter_rejected(self, start, end, chunk_rows)

    def read_rejected(self, start: object, end: object) -> pd.DataFrame:
        """The window's rejected records as one frame (tests, small windows)."""
        chunks = list(self.iter_rejected(start, end))
        return pd.concat(chunks, ignore_index=True) if chunks else pd.DataFrame()

    def append_requests(self, records: Sequence[RequestRecord]) -> int:
        """Log /predict requests (status, latency) in one transaction."""
        return _append_requests(self, records)

    def request_stats(self, start: object, end: object) -> RequestStats:
        """Requests of ``[start, end)``: count, 5xx count, sorted latencies."""
        return _request_stats(self, start, end)

    def ping(self) -> None:
        """Raise if the database cannot be reached."""
        with self.engine.connect() as connection:
            connection.execute(text("SELECT 1"))

    def close(self) -> None:
        self.engine.dispose()
        self._probe.close()


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


def open_sample_reader(
    location: str, timestamp_column: str = TIMESTAMP, *, sqlite_synchronous: str = "FULL"
) -> SampleWindowReader:
    """A window reader for a store URL (``sqlite:``/``postgresql:``) or a file/folder path."""
    if is_sql_url(location):
        return SqlSampleStore(location, sqlite_synchronous=sqlite_synchronous)
    return FileSampleSource(location, timestamp_column=timestamp_column)


def utc_now() -> datetime:
    return datetime.now(UTC)


# -- rejected records, the overflow counter, and the requests log (issue 16) -----------------
# Records the service refused (422) are traffic too: stored beside the samples, in the
# same columnar encoding and the same transaction as the accepted samples of a batch,
# never scored. Their volume is capped in the service (serving.rejected_max_per_minute);
# what the cap drops is counted per minute in REJECTED_OVERFLOW_TABLE. Every /predict
# request's status and latency go to REQUESTS_TABLE (the latency and 5xx monitors).
REJECTED_TABLE = "driftgate_rejected"
REJECTED_OVERFLOW_TABLE = "driftgate_rejected_overflow"
REQUESTS_TABLE = "driftgate_requests"
# The offending raw value is kept as bounded text: it may be text for a number, a
# number out of range, or a JSON structure; its first characters are what a reviewer
# needs, and the bound keeps a flood of long strings from filling the disk.
MAX_RAW_VALUE_CHARS = 200
MAX_REASONS = 32  # broken fields kept per rejected record (the first ones)
MAX_NAME_CHARS = 128  # a field or rule name beyond this is cut (an extra field is any key)
# What a rejected row costs on disk beyond its values: its header, its entry in the
# time index, and the part-filled pages of a row longer than a SQLite page. Measured
# (3,000 rows, WAL checkpointed): SQLite 5,486 bytes on disk per row of 5,265 bytes
# of values, 844 per 705; PostgreSQL 871 per 705 (long text is compressed there).
REJECTED_ROW_OVERHEAD_BYTES = 192
_US_PER_MINUTE = 60_000_000

_traffic_metadata = MetaData()
rejected_table = Table(
    REJECTED_TABLE,
    _traffic_metadata,
    Column("id", BigInteger().with_variant(Integer, "sqlite"), primary_key=True),
    Column("ts_us", BigInteger, nullable=False),
    Column("received_us", BigInteger, nullable=False),
    Column("model_name", String(256), nullable=False),
    Column("model_version", String(64), nullable=False),
    Column("request_id", String(128), nullable=False),
    Column("record_index", Integer, nullable=False),
    Column("schema_id", Integer, nullable=False),
    Column("numbers", LargeBinary, nullable=False),  # the model features that are numbers
    Column("others", Text),
    Column("rule", String(MAX_NAME_CHARS), nullable=False),  # the first broken rule's id
    Column("field", String(MAX_NAME_CHARS), nullable=False),  # ... and its field
    Column("raw_value", String(MAX_RAW_VALUE_CHARS + 8)),  # that field's value, JSON, cut
    Column("reasons", Text, nullable=False),  # JSON [[field, rule], ...], at most MAX_REASONS
    Column("sample_fraction", Float, nullable=False),
    Column("client", String(CLIENT_KEY_CHARS), nullable=True),  # as the samples' client
    Index(f"ix_{REJECTED_TABLE}_ts", "ts_us", "id"),
)
rejected_overflow_table = Table(
    REJECTED_OVERFLOW_TABLE,
    _traffic_metadata,
    Column("minute_us", BigInteger, primary_key=True),  # event time, start of its minute
    Column("records", BigInteger, nullable=False),
)
requests_table = Table(
    REQUESTS_TABLE,
    _traffic_metadata,
    Column("id", BigInteger().with_variant(Integer, "sqlite"), primary_key=True),
    Column("ts_us", BigInteger, nullable=False),  # event time (the request's timestamp)
    Column("status", Integer, nullable=False),
    Column("latency_s", Float, nullable=False),
    Index(f"ix_{REQUESTS_TABLE}_ts", "ts_us"),
)


@dataclass(frozen=True)
class RejectedSample:
    """One record the service refused (422): stored, never scored.

    ``features`` holds the model's features only (``clean_rejected_features``): a
    number that parses as one, else NaN; a category's text. ``rule`` / ``field`` are
    the first broken rule's id and its field, ``raw_value`` that field's value as JSON
    text cut to MAX_RAW_VALUE_CHARS, ``reasons`` every broken (field, rule) pair.
    """

    timestamp: datetime
    request_id: str
    record_index: int
    model_name: str
    model_version: str
    features: Mapping[str, float | str | None]
    rule: str
    field: str
    raw_value: str | None
    reasons: tuple[tuple[str, str], ...]
    received_at: datetime | None = None
    sample_fraction: float = 1.0
    client: str | None = None  # the caller's key, as Sample.client


@dataclass(frozen=True)
class RejectedOverflow:
    """Rejected records the cap dropped, counted per minute of event time (``counts``:
    minute start in microseconds -> records). Carried through the writer like samples,
    so the count commits in the same transaction as the batch it rides with."""

    request_id: str  # the request that carried it (the writer keys work by request id)
    counts: Mapping[int, int]


@dataclass(frozen=True)
class RequestRecord:
    """One /predict request: event time, HTTP status, latency in seconds."""

    timestamp: datetime
    status: int
    latency_s: float


@dataclass(frozen=True)
class RejectedStats:
    """Rejected records of a window: ``rows`` stored, ``overflow`` dropped by the cap
    (counted), and records per rule kind and per field (``by_kind``, ``by_field``,
    ``by_field_kind``: a record counts once per key it breaks)."""

    rows: int
    overflow: int
    by_kind: dict[str, int] = field(default_factory=dict)
    by_field: dict[str, int] = field(default_factory=dict)
    by_field_kind: dict[tuple[str, str], int] = field(default_factory=dict)


@dataclass(frozen=True)
class RequestStats:
    """Requests of a window: their count, 5xx count and latencies (seconds, sorted)."""

    count: int
    errors: int
    latencies: np.ndarray


def rule_kind_of(rule: str) -> str:
    """The kind of a rule id: ``columns.x.range`` -> ``range``, ``model.feature`` ->
    ``feature`` (the last dotted segment, as ``contract:<kind>`` uses)."""
    return rule.rsplit(".", 1)[-1]


def raw_text(value) -> str | None:
    """A rejected field's value as bounded JSON text (None when the field was absent)."""
    try:
        rendered = json.dumps(value, allow_nan=True, default=repr)
    except (TypeError, ValueError, RecursionError):
        rendered = repr(value)
    return rendered[:MAX_RAW_VALUE_CHARS]


def clean_rejected_features(
    record: Mapping, numeric: Sequence[str], categorical: Sequence[str] = ()
) -> dict[str, float | str | None]:
    """The model's features of a rejected record, as storable values: a numeric
    feature that parses as a finite float64 (an int, a float, a numeric string such as
    ``"1013.2"``) is that number — out-of-range values included, which is what makes
    a refused shift visible to drift on ``population: all``; anything else is NaN. A
    categorical feature keeps its text (cut), anything else is None. Extra fields are
    not stored (a flood of junk keys cannot grow the rows)."""
    cleaned: dict[str, float | str | None] = {}
    for name in numeric:
        value = record.get(name)
        number = math.nan
        if isinstance(value, (int, float, str)) and not isinstance(value, bool):
            try:
                number = float(value[:64] if isinstance(value, str) else value)
            except (ValueError, OverflowError):
                number = math.nan
        cleaned[name] = number if math.isfinite(number) else math.nan
    for name in categorical:
        value = record.get(name)
        if isinstance(value, int) and not isinstance(value, bool):
            value = str(value)
        cleaned[name] = value[:MAX_NAME_CHARS] if isinstance(value, str) else math.nan
    return cleaned


def _rejected_rows(store: SqlSampleStore, rejected: Sequence[RejectedSample]) -> list[dict]:
    encoded = [_encode(r.features) for r in rejected]
    unknown = {key for key, _, _ in encoded if key not in store._schema_ids}
    if unknown:
        store._register_schemas(unknown)
    return [
        {**_rejected_values(r, blob, others), "schema_id": store._schema_ids[key]}
        for r, (key, blob, others) in zip(rejected, encoded, strict=True)
    ]


def _rejected_values(r: RejectedSample, blob: bytes, others: str | None) -> dict:
    """The stored values of ``r``'s row, but its schema id (cut as the columns are)."""
    return {
        "ts_us": _storable_us(r.timestamp),
        "received_us": _storable_us(r.received_at or r.timestamp),
        "model_name": r.model_name,
        "model_version": r.model_version,
        "request_id": r.request_id,
        "record_index": r.record_index,
        "numbers": blob,
        "others": others,
        "rule": r.rule[:MAX_NAME_CHARS],
        "field": r.field[:MAX_NAME_CHARS],
        "raw_value": None if r.raw_value is None else r.raw_value[:MAX_RAW_VALUE_CHARS],
        "reasons": json.dumps(
            [[f[:MAX_NAME_CHARS], k[:MAX_NAME_CHARS]] for f, k in r.reasons[:MAX_REASONS]]
        ),
        "sample_fraction": float(r.sample_fraction),
        "client": r.client,
    }


def rejected_row_bytes(r: RejectedSample) -> int:
    """What storing ``r`` costs, in bytes: its row's values as stored (text as UTF-8,
    the numbers' blob, 8 bytes per integer or float, the schema id and row id
    included) plus REJECTED_ROW_OVERHEAD_BYTES. The measure of the rejected-records
    byte budget (``serving.rejected_max_bytes_per_minute``)."""
    _, blob, others = _encode(r.features)
    values = _rejected_values(r, blob, others)
    size = 16  # the schema id and the row id
    for value in values.values():
        if isinstance(value, str):
            size += len(value.encode("utf-8", "surrogatepass"))
        elif isinstance(value, bytes):
            size += len(value)
        elif value is not None:
            size += 8
    return size + REJECTED_ROW_OVERHEAD_BYTES


def _insert_traffic(store: SqlSampleStore, connection: Connection, prepared: dict) -> None:
    """Insert the rejected rows and request rows and add the overflow counts (one
    transaction with the batch's samples)."""
    if prepared["rejected"]:
        connection.execute(rejected_table.insert(), prepared["rejected"])
    if prepared["requests"]:  # the requests log rides with the batch: no commit of its own
        connection.execute(requests_table.insert(), prepared["requests"])
    if prepared["overflow"]:
        insert = (postgresql.insert if store.dialect == "postgresql" else sqlite.insert)(
            rejected_overflow_table
        )
        statement = insert.on_conflict_do_update(
            index_elements=["minute_us"],
            set_={"records": rejected_overflow_table.c.records + insert.excluded.records},
        )
        for minute, count in sorted(prepared["overflow"].items()):
            connection.execute(statement.values(minute_us=minute, records=count))


def _split_batch(store: SqlSampleStore, batch: Sequence) -> tuple[list[Sample], dict]:
    """The accepted samples of a writer batch, and its rejected rows, overflow counts
    and request rows."""
    accepted, rejected, overflow, requests = [], [], {}, []
    for item in batch:
        if isinstance(item, RejectedSample):
            rejected.append(item)
        elif isinstance(item, RequestRecord):
            requests.append(item)
        elif isinstance(item, RejectedOverflow):
            for minute, count in item.counts.items():
                overflow[minute] = overflow.get(minute, 0) + int(count)
        else:
            accepted.append(item)
    return accepted, {"rejected": _rejected_rows(store, rejected) if rejected else [],
                      "overflow": overflow, "requests": _request_rows(requests)}  # fmt: skip


def _request_rows(records: Sequence[RequestRecord]) -> list[dict]:
    return [
        {"ts_us": _storable_us(r.timestamp), "status": int(r.status),
         "latency_s": float(r.latency_s)}
        for r in records
    ]  # fmt: skip


def _append_requests(store: SqlSampleStore, records: Sequence[RequestRecord]) -> int:
    if not records:
        return 0
    rows = _request_rows(records)
    with write_transaction(store.engine) as connection:
        connection.execute(requests_table.insert(), rows)
    return len(rows)


def _rejected_stats(store: SqlSampleStore, start: object, end: object) -> RejectedStats:
    low, high = _to_us(start), _to_us(end)
    window = (rejected_table.c.ts_us >= low) & (rejected_table.c.ts_us < high)
    by_kind: dict[str, int] = {}
    by_field: dict[str, int] = {}
    by_pair: dict[tuple[str, str], int] = {}
    rows = 0
    with store.engine.connect() as connection:
        result = connection.execution_options(stream_results=True, yield_per=FETCH_ROWS).execute(
            select(rejected_table.c.reasons).where(window)
        )
        for (reasons,) in result:
            rows += 1
            pairs = {(f, rule_kind_of(r)) for f, r in json.loads(reasons)}
            for kind in {k for _, k in pairs}:
                by_kind[kind] = by_kind.get(kind, 0) + 1
            for name in {f for f, _ in pairs}:
                by_field[name] = by_field.get(name, 0) + 1
            for pair in pairs:
                by_pair[pair] = by_pair.get(pair, 0) + 1
        overflow = connection.execute(
            select(func.coalesce(func.sum(rejected_overflow_table.c.records), 0)).where(
                rejected_overflow_table.c.minute_us >= low,
                rejected_overflow_table.c.minute_us < high,
            )
        ).scalar()
    return RejectedStats(rows, int(overflow), by_kind, by_field, by_pair)


def _iter_rejected(
    store: SqlSampleStore, start: object, end: object, chunk_rows: int = DEFAULT_CHUNK_ROWS
) -> Iterator[pd.DataFrame]:
    """Rejected records of the window in time order, in chunks: the stored features
    (as :meth:`SqlSampleStore.iter_window` decodes them) and rule, field, raw_value,
    request_id, record_index, timestamp."""
    t = rejected_table
    query = (
        select(t.c.ts_us, t.c.request_id, t.c.record_index, t.c.schema_id, t.c.numbers,
               t.c.others, t.c.rule, t.c.field, t.c.raw_value)
        .where(t.c.ts_us >= _to_us(start), t.c.ts_us < _to_us(end))
        .order_by(t.c.ts_us, t.c.id)
    )  # fmt: skip
    store._load_schemas()
    with store.engine.connect() as connection:
        result = connection.execution_options(stream_results=True, yield_per=FETCH_ROWS).execute(
            query
        )
        while rows := result.fetchmany(chunk_rows):
            columns = list(zip(*rows, strict=True))
            if not set(columns[3]) <= store._schemas.keys():
                store._load_schemas()
            features = pd.DataFrame(
                _decode(columns[3], columns[4], columns[5], store._schemas), index=None
            )
            meta = pd.DataFrame(
                {
                    TIMESTAMP: pd.to_datetime(np.asarray(columns[0], dtype=np.int64), unit="us",
                                              utc=True),
                    "request_id": list(columns[1]),
                    "record_index": np.asarray(columns[2], dtype=np.int64),
                }
            )  # fmt: skip
            tail = pd.DataFrame(
                {"rule": list(columns[6]), "field": list(columns[7]),
                 "raw_value": list(columns[8])}
            )  # fmt: skip
            yield pd.concat([meta, features, tail], axis=1)


def _request_stats(store: SqlSampleStore, start: object, end: object) -> RequestStats:
    t = requests_table
    with store.engine.connect() as connection:
        rows = connection.execute(
            select(t.c.status, t.c.latency_s).where(
                t.c.ts_us >= _to_us(start), t.c.ts_us < _to_us(end)
            )
        ).all()
    if not rows:
        return RequestStats(0, 0, np.empty(0))
    status = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
    latency = np.sort(np.fromiter((r[1] for r in rows), dtype=float, count=len(rows)))
    return RequestStats(len(rows), int(((status >= 500) & (status < 600)).sum()), latency)


def _purge_traffic(
    store: SqlSampleStore, cutoff_us: int, ranges: list[tuple[int, int]], batch_rows: int
) -> int:
    """Retention for the rejected records, overflow counts and requests log: rows older
    than the cutoff outside the protected ranges, in short transactions. (Not
    partitioned: their volume is bounded by the cap and by the request rate.)"""

    def batch_of(table, key: str):
        time_column = table.c.minute_us if key == "minute_us" else table.c.ts_us

        def delete_batch(connection: Connection) -> int:
            chosen = select(table.c[key]).where(time_column < cutoff_us)
            for low, high in ranges + store._active_leases(connection):
                chosen = chosen.where((time_column < low) | (time_column >= high))
            statement = table.delete().where(
                table.c[key].in_(chosen.limit(batch_rows).scalar_subquery())
            )
            return connection.execute(statement).rowcount

        return delete_batch

    return sum(
        delete_in_batches(store.engine, batch_of(table, key), batch_rows)
        for table, key in (
            (rejected_table, "id"),
            (requests_table, "id"),
            (rejected_overflow_table, "minute_us"),
        )
    )


def minute_of(moment: object) -> int:
    """Start of ``moment``'s minute, microseconds since the epoch (overflow counts' key)."""
    us = _to_us(moment)
    return us - us % _US_PER_MINUTE
