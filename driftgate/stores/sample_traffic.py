"""Rejected records, the overflow counter and the requests log of the sample store
(issue 16): written in the accepted samples' transaction, read per window by the
traffic monitors. The tables are :mod:`driftgate.stores.sample_tables`'."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

import numpy as np
import pandas as pd
from sqlalchemy import (
    Connection,
    func,
    select,
)
from sqlalchemy.dialects import postgresql, sqlite

from driftgate.stores._sql import (
    delete_in_batches,
    write_transaction,
)
from driftgate.stores._time import _storable_us, _to_us
from driftgate.stores.sample_encoding import _decode, _encode
from driftgate.stores.sample_tables import (
    _US_PER_MINUTE,
    DEFAULT_CHUNK_ROWS,
    FETCH_ROWS,
    MAX_NAME_CHARS,
    MAX_RAW_VALUE_CHARS,
    MAX_REASONS,
    REJECTED_ROW_OVERHEAD_BYTES,
    TIMESTAMP,
    rejected_overflow_table,
    rejected_table,
    requests_table,
)
from driftgate.stores.sample_types import Sample


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


def _rejected_rows(store, rejected: Sequence[RejectedSample]) -> list[dict]:
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


def _insert_traffic(store, connection: Connection, prepared: dict) -> None:
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


def _split_batch(store, batch: Sequence) -> tuple[list[Sample], dict]:
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


def _append_requests(store, records: Sequence[RequestRecord]) -> int:
    if not records:
        return 0
    rows = _request_rows(records)
    with write_transaction(store.engine) as connection:
        connection.execute(requests_table.insert(), rows)
    return len(rows)


def _rejected_stats(store, start: object, end: object) -> RejectedStats:
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
    store, start: object, end: object, chunk_rows: int = DEFAULT_CHUNK_ROWS
) -> Iterator[pd.DataFrame]:
    """Rejected records of the window in time order, in chunks: the stored features
    (as :meth:`SqlSampleStore.iter_window` decodes them) and rule, field, raw_value,
    reasons (every broken field and rule, as JSON ``[[field, rule], ...]``), request_id,
    record_index, timestamp."""
    t = rejected_table
    query = (
        select(t.c.ts_us, t.c.request_id, t.c.record_index, t.c.schema_id, t.c.numbers,
               t.c.others, t.c.rule, t.c.field, t.c.raw_value, t.c.reasons)
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
                 "raw_value": list(columns[8]), "reasons": list(columns[9])}
            )  # fmt: skip
            yield pd.concat([meta, features, tail], axis=1)


def _request_stats(store, start: object, end: object) -> RequestStats:
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


def _purge_traffic(store, cutoff_us: int, ranges: list[tuple[int, int]], batch_rows: int) -> int:
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
