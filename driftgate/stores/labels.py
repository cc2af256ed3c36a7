"""The label store: delayed true outcomes of served records, beside their samples.

Labels live in ``driftgate_labels`` in the sample store's database (same URL, SQLite or
PostgreSQL), one row per ``(request_id, record_index)``, so a window's labelled records
are one join away from its samples. Each row keeps the event time and model version of
the sample it labels (windows and retention select on them without the join), the
label's canonical text and number (:mod:`monitors.labels`), when it arrived, how
often it was corrected, and its **source**: the name of the authenticated sender
(``admin``, a ``serving.label_sources`` name, the ``driftgate labels load`` source), or
``unverified`` when nobody vouched for it (``serving.feedback_auth: none`` without a
token). A retrain never scores a candidate on unverified labels
(:mod:`driftgate.jobs.retrain_data`). A table made before the column existed gains it
when a store opens it, its rows marked ``unverified``: nobody recorded who sent them.

Retention follows the samples: :meth:`LabelStore.purge` removes labels older than the
cutoff whose sample is gone, so a label is kept exactly as long as the sample it
labels (an open review's evidence window, a leased window, a partition not yet
dropped all keep their labels too).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

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
    and_,
    func,
    select,
    text,
    tuple_,
)
from sqlalchemy.dialects import postgresql, sqlite

from driftgate.config.serving import UNVERIFIED_SOURCE
from driftgate.stores._sql import (
    StoreError,
    create_store_engine,
    create_tables,
    delete_in_batches,
    redact,
    write_transaction,
)
from driftgate.stores._time import _to_us
from driftgate.stores.sample_tables import PURGE_BATCH_ROWS, SAMPLES_TABLE

LABELS_TABLE = "driftgate_labels"
# The source of a label nobody authenticated: kept, but never evidence a gate scores on.
UNVERIFIED = UNVERIFIED_SOURCE
SOURCE_CHARS = 64
# Keys looked up per statement: far below every database's bound-parameter limit.
LOOKUP_BATCH = 500

_metadata = MetaData()
labels_table = Table(
    LABELS_TABLE,
    _metadata,
    Column("request_id", String(128), primary_key=True),
    Column("record_index", Integer, primary_key=True),
    Column("model_name", String(256), nullable=False),
    Column("model_version", String(64), nullable=False),
    Column("ts_us", BigInteger, nullable=False),  # the labelled sample's event time
    Column("label", Text, nullable=False),  # canonical text (monitors.labels.Label.text)
    Column("value", Float, nullable=False),  # 0/1, the class index, or the value
    Column("received_us", BigInteger, nullable=False),  # when the label arrived
    Column("corrections", Integer, nullable=False, default=0),
    # Who sent the label (see the module doc); the SQL default is what a table made
    # before this column holds after the migration in LabelStore.__init__.
    Column("source", String(SOURCE_CHARS), nullable=False, server_default=UNVERIFIED),
    Index(f"ix_{LABELS_TABLE}_ts", "ts_us"),
)

Key = tuple[str, int]


def is_verified(source: str) -> bool:
    """A label some authenticated sender vouched for."""
    return source != UNVERIFIED


@dataclass(frozen=True)
class StoredLabel:
    """A label as stored: its canonical text and who sent it."""

    label: str
    source: str


@dataclass(frozen=True)
class SampleRef:
    """What a label needs to know of the sample it labels."""

    model_name: str
    model_version: str
    ts_us: int
    received_us: int


@dataclass(frozen=True)
class LabelRow:
    """One label to write: the key, its sample, and the checked label."""

    request_id: str
    record_index: int
    sample: SampleRef
    label: str
    value: float
    source: str = UNVERIFIED


class LabelStore:
    """Labels in the sample store's database (SQLite by default, PostgreSQL by URL)."""

    def __init__(self, url: str, *, sqlite_synchronous: str = "FULL") -> None:
        self.url = url
        self.engine = create_store_engine(url, sqlite_synchronous=sqlite_synchronous)
        self.dialect = self.engine.dialect.name
        create_tables(self.engine, _metadata, url, "label")
        _add_source_column(self.engine, url)
        # The samples table is the sample store's (either layout): it exists once a
        # SqlSampleStore opened the database (the service opens both first), and only
        # its key, version and time columns are read here, with plain SQL.
        self._samples = SAMPLES_TABLE
        insert = postgresql.insert if self.dialect == "postgresql" else sqlite.insert
        self._insert = (
            insert(labels_table)
            .on_conflict_do_nothing(index_elements=["request_id", "record_index"])
            .returning(labels_table.c.request_id, labels_table.c.record_index)
        )

    def __repr__(self) -> str:
        return f"LabelStore({redact(self.url)!r})"

    def close(self) -> None:
        self.engine.dispose()

    # -- lookups -----------------------------------------------------------------------
    def samples_of(self, keys: Iterable[Key]) -> dict[Key, SampleRef]:
        """The stored sample of each key that has one (a key without is unknown)."""
        keys = list(dict.fromkeys(keys))
        found: dict[Key, SampleRef] = {}
        mark = "?" if self.dialect == "sqlite" else "%s"
        for part in _batches(keys):
            ids = list({request_id for request_id, _ in part})
            sql = (
                f"SELECT request_id, record_index, model_name, model_version, ts_us, "
                f"received_us FROM {self._samples} WHERE request_id IN "
                f"({', '.join([mark] * len(ids))})"
            )
            wanted = set(part)
            try:
                with self.engine.connect() as connection:
                    rows = connection.exec_driver_sql(sql, tuple(ids)).all()
            except Exception as exc:
                if "no such table" in str(exc) or "does not exist" in str(exc):
                    return {}  # no sample was ever stored
                raise
            for request_id, index, name, version, ts_us, received_us in rows:
                key = (request_id, int(index))
                if key in wanted:
                    found[key] = SampleRef(name, version, int(ts_us), int(received_us))
        return found

    def labels_of(self, keys: Iterable[Key]) -> dict[Key, str]:
        """The stored label text of each key that has one."""
        keys = list(dict.fromkeys(keys))
        found: dict[Key, str] = {}
        table = labels_table
        for part in _batches(keys):
            query = select(table.c.request_id, table.c.record_index, table.c.label).where(
                tuple_(table.c.request_id, table.c.record_index).in_(part)
            )
            with self.engine.connect() as connection:
                for request_id, index, label in connection.execute(query):
                    found[(request_id, int(index))] = label
        return found

    def stored_of(self, keys: Iterable[Key]) -> dict[Key, StoredLabel]:
        """The stored label and source of each key that has one."""
        keys = list(dict.fromkeys(keys))
        found: dict[Key, StoredLabel] = {}
        table = labels_table
        for part in _batches(keys):
            query = select(
                table.c.request_id, table.c.record_index, table.c.label, table.c.source
            ).where(tuple_(table.c.request_id, table.c.record_index).in_(part))
            with self.engine.connect() as connection:
                for request_id, index, label, source in connection.execute(query):
                    found[(request_id, int(index))] = StoredLabel(label, source)
        return found

    # -- writing -----------------------------------------------------------------------
    def write(
        self, rows: Sequence[LabelRow], *, replace: Sequence[LabelRow] = (), now_us: int
    ) -> tuple[list[Key], list[Key]]:
        """Insert ``rows`` (new labels) and overwrite ``replace`` (corrections) in one
        transaction; durable when this returns.

        Returns (inserted, raced): ``raced`` are keys of ``rows`` that another writer
        labelled between the caller's lookup and this insert (nothing was written for
        them; the caller re-reads them to tell a duplicate from a conflict).
        """
        values = [
            {
                "request_id": row.request_id,
                "record_index": row.record_index,
                "model_name": row.sample.model_name,
                "model_version": row.sample.model_version,
                "ts_us": row.sample.ts_us,
                "label": row.label,
                "value": row.value,
                "received_us": now_us,
                "corrections": 0,
                "source": row.source,
            }
            for row in rows
        ]
        written: set[Key] = set()
        with write_transaction(self.engine) as connection:
            if values:
                # One statement built once, executed for many rows (SQLAlchemy batches
                # them); RETURNING names the rows it inserted (not rowcount: psycopg
                # reports -1 for INSERT .. ON CONFLICT DO NOTHING).
                found = connection.execute(self._insert, values)
                written.update((a, int(b)) for a, b in found)
            for row in replace:
                connection.execute(
                    labels_table.update()
                    .where(
                        and_(
                            labels_table.c.request_id == row.request_id,
                            labels_table.c.record_index == row.record_index,
                        )
                    )
                    .values(
                        label=row.label,
                        value=row.value,
                        received_us=now_us,
                        source=row.source,  # the label is now the new sender's word
                        corrections=labels_table.c.corrections + 1,
                    )
                )
        keys = [(row.request_id, row.record_index) for row in rows]
        return [k for k in keys if k in written], [k for k in keys if k not in written]

    # -- reading -----------------------------------------------------------------------
    def count(self, start: object, end: object, model_version: str | None = None) -> int:
        """Labels of samples with ``start <= event time < end`` (optionally one version)."""
        table = labels_table
        query = select(func.count()).where(
            table.c.ts_us >= _to_us(start), table.c.ts_us < _to_us(end)
        )
        if model_version is not None:
            query = query.where(table.c.model_version == str(model_version))
        with self.engine.connect() as connection:
            return int(connection.execute(query).scalar())

    def arrived_span(
        self, since: object | None, model_version: str | None = None
    ) -> tuple[int, int] | None:
        """The event times (first, last; microseconds) of the labels that arrived at or
        after ``since`` (None: ever), optionally of one version; None when none did.
        What the drift check re-judges is bounded by it (labels arrive by wall clock,
        whatever their samples' event times)."""
        table = labels_table
        query = select(func.min(table.c.ts_us), func.max(table.c.ts_us))
        if since is not None:
            query = query.where(table.c.received_us >= _to_us(since))
        if model_version is not None:
            query = query.where(table.c.model_version == str(model_version))
        with self.engine.connect() as connection:
            first, last = connection.execute(query).one()
        return None if first is None else (int(first), int(last))

    def labelled_window(
        self, start: object, end: object, model_version: str | None = None
    ) -> pd.DataFrame:
        """The labelled records of ``[start, end)`` with their stored outputs.

        Columns: request_id, record_index, model_version, prediction, predicted_class,
        label (text), value (number), source, ordered by event time.
        """
        mark = "?" if self.dialect == "sqlite" else "%s"
        where = f"l.ts_us >= {mark} AND l.ts_us < {mark}"
        params: list = [_to_us(start), _to_us(end)]
        if model_version is not None:
            where += f" AND l.model_version = {mark}"
            params.append(str(model_version))
        sql = (
            "SELECT l.request_id, l.record_index, l.model_version, s.prediction, "
            "s.predicted_class, l.label, l.value, l.source "
            f"FROM {LABELS_TABLE} l JOIN {self._samples} s "
            "ON s.request_id = l.request_id AND s.record_index = l.record_index "
            f"AND s.ts_us = l.ts_us WHERE {where} ORDER BY l.ts_us, l.request_id, l.record_index"
        )
        columns = [
            "request_id", "record_index", "model_version", "prediction", "predicted_class",
            "label", "value", "source",
        ]  # fmt: skip
        try:
            with self.engine.connect() as connection:
                rows = connection.exec_driver_sql(sql, tuple(params)).all()
        except Exception as exc:
            raise StoreError(f"cannot read labels from {redact(self.url)}: {exc}") from exc
        frame = pd.DataFrame([tuple(r) for r in rows], columns=columns)
        return frame.astype({"prediction": float, "value": float, "predicted_class": "int64"})

    # -- retention ---------------------------------------------------------------------
    def purge(self, cutoff: object, *, batch_rows: int = PURGE_BATCH_ROWS) -> int:
        """Remove labels older than ``cutoff`` (their sample's event time) whose sample
        is gone, in transactions of ``batch_rows`` (SQLite's write lock, which the
        service's writer needs, is never held for the whole purge); returns how many went."""
        cutoff_us = _to_us(cutoff)
        sql = text(
            f"DELETE FROM {LABELS_TABLE} WHERE (request_id, record_index) IN ("
            f"SELECT l.request_id, l.record_index FROM {LABELS_TABLE} l "
            f"WHERE l.ts_us < :cutoff AND NOT EXISTS (SELECT 1 FROM {self._samples} s "
            "WHERE s.request_id = l.request_id AND s.record_index = l.record_index) "
            "LIMIT :rows)"
        )
        parameters = {"cutoff": cutoff_us, "rows": batch_rows}
        return delete_in_batches(
            self.engine, lambda connection: connection.execute(sql, parameters).rowcount, batch_rows
        )

    def ping(self) -> None:
        with self.engine.connect() as connection:
            connection.execute(text("SELECT 1"))


def _add_source_column(engine, url: str) -> None:
    """Give a label table made before ``source`` existed the column (SQLite and
    PostgreSQL both add a NOT NULL column with a default in place): its rows read back
    ``unverified``, since nobody recorded who sent them."""
    from sqlalchemy import inspect

    def present() -> bool:
        return "source" in {c["name"] for c in inspect(engine).get_columns(LABELS_TABLE)}

    if present():
        return
    try:
        with engine.begin() as connection:
            connection.execute(
                text(
                    f"ALTER TABLE {LABELS_TABLE} ADD COLUMN source VARCHAR({SOURCE_CHARS}) "
                    f"NOT NULL DEFAULT '{UNVERIFIED}'"
                )
            )
    except Exception as exc:  # another opener may have added it first
        if not present():
            raise StoreError(
                f"cannot add column source to label store {redact(url)}: {exc}"
            ) from exc


def _batches(items: list) -> Iterable[list]:
    for i in range(0, len(items), LOOKUP_BATCH):
        yield items[i : i + LOOKUP_BATCH]
