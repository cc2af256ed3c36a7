"""The sample store's tables: names, limits, the columnar and JSON sample layouts,
the schemas, leases and traffic tables (rejected records, overflow, requests log), and
the columns added to older stores when they open (:mod:`driftgate.stores.samples`)."""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy import (
    BigInteger,
    Column,
    Float,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Table,
    Text,
    inspect,
    text,
)

from driftgate.stores._sql import (
    StoreError,
    redact,
)

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


def _encoded_record_columns() -> list[Column]:
    """The columns of a stored record, accepted or rejected, between its time and its
    encoded values (new objects each call: a Column belongs to one table)."""
    return [
        Column("received_us", BigInteger, nullable=False),
        Column("model_name", String(256), nullable=False),
        Column("model_version", String(64), nullable=False),
        Column("request_id", String(128), nullable=False),
        Column("record_index", Integer, nullable=False),
        Column("schema_id", Integer, nullable=False),
    ]


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
        *_encoded_record_columns(),
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


# Columns added after the table's first release: nullable, added to an older store when
# it is opened (the rows it already holds read back as NULL).
_ADDED_COLUMNS = {
    "predicted_label": "VARCHAR(256)",
    # On a partitioned PostgreSQL table the parent's ADD COLUMN reaches every partition.
    "client": f"VARCHAR({CLIENT_KEY_CHARS})",
}
_ADDED_REJECTED_COLUMNS = {"client": f"VARCHAR({CLIENT_KEY_CHARS})"}


def _add_missing_columns(engine, url: str) -> None:

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
    *_encoded_record_columns(),
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
