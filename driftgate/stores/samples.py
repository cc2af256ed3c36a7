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

import dataclasses
import hashlib
import json
import secrets
import sqlite3
import time
import uuid
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime, timedelta

import numpy as np
import pandas as pd
from sqlalchemy import (
    Connection,
    MetaData,
    bindparam,
    func,
    inspect,
    select,
    text,
)
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.exc import DBAPIError, IntegrityError, OperationalError, ProgrammingError

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
    sqlite_path,
    write_transaction,
)

# The names this module had before it was split (issue 27), importable from here as before.
from driftgate.stores._time import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    _storable_us,
    _to_us,
    storable_time,
    time_before,
    to_utc,
    utc_now,
)
from driftgate.stores.sample_encoding import (
    _ChunkBuilder,
    _decode,
    _empty_window,
    _encode,
    _gc_paused,
    _json_value,
    _Piece,
)
from driftgate.stores.sample_files import FileSampleSource
from driftgate.stores.sample_tables import (
    _EPOCH,
    _US_PER_DAY,
    CLIENT_KEY_CHARS,
    DEFAULT_CHUNK_ROWS,
    DROP_LOCK_WAIT_MS,
    FETCH_ROWS,
    LAYOUT_COLUMNAR,
    LAYOUT_JSON,
    LEASE_SECONDS,
    LEASES_TABLE,
    MAX_NAME_CHARS,
    MAX_RAW_VALUE_CHARS,
    MAX_REASONS,
    META_COLUMNS,
    NUMBER,
    OTHER,
    OUTPUT_COLUMNS,
    PURGE_BATCH_ROWS,
    REJECTED_OVERFLOW_TABLE,
    REJECTED_ROW_OVERHEAD_BYTES,
    REJECTED_TABLE,
    REQUESTS_TABLE,
    SAMPLES_TABLE,
    SCHEMAS_TABLE,
    TIMESTAMP,
    UNKNOWN_CLIENT,
    _add_missing_columns,
    _columnar_table,
    _json_metadata,
    _shared_metadata,
    _traffic_metadata,
    leases_table,
    rejected_overflow_table,
    rejected_table,
    requests_table,
    samples_table,
    schemas_table,
)
from driftgate.stores.sample_traffic import (
    RejectedOverflow,
    RejectedSample,
    RejectedStats,
    RequestRecord,
    RequestStats,
    _append_requests,
    _insert_traffic,
    _iter_rejected,
    _purge_traffic,
    _rejected_stats,
    _request_stats,
    _split_batch,
    clean_rejected_features,
    minute_of,
    raw_text,
    rejected_row_bytes,
    rule_kind_of,
)
from driftgate.stores.sample_types import (
    ClientMissing,
    DuplicateRequestIds,
    PurgeResult,
    Sample,
    SampleWindowReader,
    WindowStats,
)
from driftgate.stores.sampling import SAMPLING_KEY_TABLE, RequestSampling, sampling_key_table

__all__ = [
    "CLIENT_KEY_CHARS",
    "DEFAULT_CHUNK_ROWS",
    "DROP_LOCK_WAIT_MS",
    "EARLIEST_TIMESTAMP",
    "FETCH_ROWS",
    "LATEST_TIMESTAMP",
    "LAYOUT_COLUMNAR",
    "LAYOUT_JSON",
    "LEASES_TABLE",
    "LEASE_SECONDS",
    "MAX_NAME_CHARS",
    "MAX_RAW_VALUE_CHARS",
    "MAX_REASONS",
    "META_COLUMNS",
    "NUMBER",
    "OTHER",
    "OUTPUT_COLUMNS",
    "PURGE_BATCH_ROWS",
    "REJECTED_OVERFLOW_TABLE",
    "REJECTED_ROW_OVERHEAD_BYTES",
    "REJECTED_TABLE",
    "REQUESTS_TABLE",
    "SAMPLES_TABLE",
    "SAMPLING_KEY_TABLE",
    "SCHEMAS_TABLE",
    "TIMESTAMP",
    "UNKNOWN_CLIENT",
    "ClientMissing",
    "DuplicateRequestIds",
    "FileSampleSource",
    "PurgeResult",
    "RejectedOverflow",
    "RejectedSample",
    "RejectedStats",
    "RequestRecord",
    "RequestSampling",
    "RequestStats",
    "Sample",
    "SampleWindowReader",
    "SqlSampleStore",
    "WindowStats",
    "clean_rejected_features",
    "leases_table",
    "minute_of",
    "open_sample_reader",
    "raw_text",
    "rejected_overflow_table",
    "rejected_row_bytes",
    "rejected_table",
    "requests_table",
    "rule_kind_of",
    "samples_table",
    "sampling_key_table",
    "schemas_table",
    "storable_time",
    "time_before",
    "to_utc",
    "utc_now",
]


def _day_name(day: int) -> str:
    return f"{SAMPLES_TABLE}_p{(_EPOCH + timedelta(days=day)):%Y%m%d}"


def _overlaps(low: int, high: int, ranges: Sequence[tuple[int, int]]) -> bool:
    return any(low < end and start < high for start, end in ranges)


# SQLite's default limit on a statement's parameters (SQLITE_MAX_VARIABLE_NUMBER since
# 3.32; older builds: 999).
_SQLITE_MAX_VARIABLES = 32_766 if sqlite3.sqlite_version_info >= (3, 32) else 999


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
            if self.dialect == "sqlite":
                self._insert_sqlite(connection, rows, traffic, refuse_known_request_ids)
                return
            if refuse_known_request_ids and rows:
                ids = list({r["request_id"] for r in rows})
                known = set(connection.execute(self._known_request_ids, {"ids": ids}).scalars())
                if known:
                    raise DuplicateRequestIds(known)
            if rows:
                connection.execute(self.table.insert(), rows)
            _insert_traffic(self, connection, traffic)

    def _insert_sqlite(
        self,
        connection: Connection,
        rows: list[dict],
        traffic: dict,
        refuse_known_request_ids: bool,
    ) -> None:
        """:meth:`_insert`'s statements on SQLite, run by the transaction's own sqlite3
        connection: the id check, the samples and the requests log as plain SQL.

        Why: SQLAlchemy's statement machinery (parameter processing per row, the
        execution context per statement) was about a third of the service's writer
        thread, which every answered request waits for (issue 32,
        benchmarks/request_path_bench.py); the same rows go in, in the same
        transaction, so durability does not change (the inserts are multi-row: see
        below). A sqlite3
        error is raised as the SQLAlchemy error it would have been (OperationalError
        for a read-only file...), which :meth:`append` and the writer handle as before.
        """
        cursor = connection.connection.driver_connection.cursor()
        statement, params = "", None
        try:
            if refuse_known_request_ids and rows:
                params = list({r["request_id"] for r in rows})
                statement = (
                    f"SELECT DISTINCT request_id FROM {self.table.name} "
                    f"WHERE request_id IN ({', '.join('?' * len(params))})"
                )
                known = {found for (found,) in cursor.execute(statement, params)}
                if known:
                    raise DuplicateRequestIds(known)
            for table, table_rows in (
                (self.table.name, rows),
                (REQUESTS_TABLE, traffic["requests"]),
            ):
                if table_rows:
                    columns = list(table_rows[0])
                    # One multi-row INSERT per chunk, not executemany: sqlite3 releases
                    # the GIL around every row's step and must take it back each time,
                    # which under load waits on the event loop thread (docs/serving.md,
                    # fifth stop).
                    per_statement = max(1, _SQLITE_MAX_VARIABLES // len(columns))
                    row_marks = f"({', '.join('?' * len(columns))})"
                    for start in range(0, len(table_rows), per_statement):
                        chunk = table_rows[start : start + per_statement]
                        statement = (
                            f"INSERT INTO {table} ({', '.join(columns)}) "
                            f"VALUES {', '.join([row_marks] * len(chunk))}"
                        )
                        params = [row[c] for row in chunk for c in columns]
                        cursor.execute(statement, params)
        except sqlite3.Error as exc:
            raise DBAPIError.instance(
                statement, params, exc, sqlite3.Error,
                hide_parameters=self.engine.hide_parameters, dialect=self.engine.dialect,
            ) from exc  # fmt: skip
        finally:
            cursor.close()
        if traffic["rejected"] or traffic["overflow"]:  # rarer: through SQLAlchemy
            _insert_traffic(self, connection, {**traffic, "requests": []})

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


def open_sample_reader(
    location: str, timestamp_column: str = TIMESTAMP, *, sqlite_synchronous: str = "FULL"
) -> SampleWindowReader:
    """A window reader for a store URL (``sqlite:``/``postgresql:``) or a file/folder path."""
    if is_sql_url(location):
        return SqlSampleStore(location, sqlite_synchronous=sqlite_synchronous)
    return FileSampleSource(location, timestamp_column=timestamp_column)
