"""Engines for the SQL-backed stores: SQLite by default, PostgreSQL by URL.

Both stores (samples and control state) open their database through
:func:`create_store_engine`, so durability settings live in one place:

- **SQLite** runs in WAL mode with ``synchronous=FULL`` by default: every commit
  fsyncs the write-ahead log before it returns, so a committed batch survives a
  SIGKILL of the process *and* an OS crash or power loss. ``NORMAL`` (configurable)
  still survives a killed process — the WAL pages are in the OS page cache once
  ``COMMIT`` returns — but may lose the last commits on power loss. The sample writer
  commits whole batches (group commit), so the fsync per commit is amortised and
  ``FULL`` costs little throughput.
- **PostgreSQL** commits are durable with the server's default
  ``synchronous_commit=on`` (the commit waits for the WAL flush). A URL without a
  driver (``postgresql://...``) uses psycopg 3.

Transactions that read and then write (the pause switch) must not interleave: on
SQLite they start with ``BEGIN IMMEDIATE`` (take the write lock up front) via
:func:`write_transaction`; on PostgreSQL they lock the row with ``FOR UPDATE``.
"""

from __future__ import annotations

import contextlib
import os
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy import (
    BigInteger,
    Column,
    Connection,
    Engine,
    Integer,
    MetaData,
    String,
    Table,
    create_engine,
    event,
    inspect,
    select,
    text,
)
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DBAPIError, OperationalError, ProgrammingError
from sqlalchemy.pool import NullPool

from driftgate.core.errors import EXIT_BACKEND, DriftgateError

SQLITE_SYNCHRONOUS_MODES = ("FULL", "NORMAL", "EXTRA")
# How long a SQLite connection waits for another writer's lock before failing.
SQLITE_BUSY_TIMEOUT_MS = 10_000
_BEGIN_OPTION = "driftgate_sqlite_begin"


class StoreError(DriftgateError, RuntimeError):
    """A store cannot be opened or refused an operation; the message names the store."""

    exit_code = EXIT_BACKEND


def normalise_url(url: str) -> str:
    """``postgresql://`` / ``postgres://`` without a driver become psycopg 3 URLs."""
    for prefix in ("postgresql://", "postgres://"):
        if url.startswith(prefix):
            return "postgresql+psycopg://" + url[len(prefix) :]
    return url


def is_sql_url(url: str) -> bool:
    return normalise_url(url).split(":", 1)[0].split("+", 1)[0] in ("sqlite", "postgresql")


def redact(url: str) -> str:
    """The URL with any password masked, for logs and error messages."""
    try:
        return make_url(url).render_as_string(hide_password=True)
    except Exception:
        return "<unparseable store URL>"


def create_store_engine(
    url: str, *, sqlite_synchronous: str = "FULL", pooled: bool = True
) -> Engine:
    """An engine for ``url`` with the durability settings described in the module doc.

    For a SQLite file the parent folder is created; ``:memory:`` is refused because
    each connection would see its own empty database. ``pooled=False``: every
    ``connect()`` opens a new connection (the write probe's, see :class:`WriteProbe`).
    """
    pool = {} if pooled else {"poolclass": NullPool}
    url = normalise_url(url)
    try:
        parsed = make_url(url)
        backend = parsed.get_backend_name()
    except Exception as exc:  # ArgumentError, or ValueError for a port such as ":x"
        # The message may hold the URL: say what is wrong without it (or its password).
        raise StoreError(
            f"store URL cannot be parsed ({type(exc).__name__}): use sqlite:///PATH or "
            "postgresql://USER@HOST/DB"
        ) from None
    if backend == "sqlite":
        database = parsed.database or ""
        if database in ("", ":memory:") or database.startswith("file::memory:"):
            raise StoreError(f"{url}: in-memory SQLite cannot be shared; use a file")
        mode = sqlite_synchronous.upper()
        if mode not in SQLITE_SYNCHRONOUS_MODES:
            raise StoreError(
                f"sqlite synchronous={sqlite_synchronous!r}; use one of {SQLITE_SYNCHRONOUS_MODES}"
            )
        try:
            Path(database).expanduser().parent.mkdir(parents=True, exist_ok=True)
        except (OSError, ValueError) as exc:  # read-only, a NUL in the path...
            raise StoreError(f"{url}: cannot create the folder of the SQLite file: {exc}") from exc
        engine = create_engine(
            url,
            connect_args={"timeout": SQLITE_BUSY_TIMEOUT_MS / 1000, "check_same_thread": False},
            **pool,
        )
        _configure_sqlite(engine, mode)
        return engine
    if backend == "postgresql":
        return create_engine(url, pool_pre_ping=pooled, **pool)
    raise StoreError(f"unsupported store URL {redact(url)}: use sqlite:///PATH or postgresql://...")


def _configure_sqlite(engine: Engine, synchronous: str) -> None:
    # pysqlite's own transaction handling begins lazily and cannot BEGIN IMMEDIATE;
    # SQLAlchemy's documented recipe: turn it off and emit BEGIN ourselves.
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection, _record) -> None:
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute(f"PRAGMA synchronous={synchronous}")
        cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(connection: Connection) -> None:
        connection.exec_driver_sql(connection.get_execution_options().get(_BEGIN_OPTION, "BEGIN"))


@contextlib.contextmanager
def write_transaction(engine: Engine, busy_timeout_ms: int | None = None) -> Iterator[Connection]:
    """A transaction that holds the write lock from its first statement (SQLite) —
    commit on success, roll back on error. ``busy_timeout_ms`` replaces SQLite's wait
    for another writer (SQLITE_BUSY_TIMEOUT_MS) for this transaction, and bounds the
    wait for a row lock on PostgreSQL (``lock_timeout``)."""
    sqlite = engine.dialect.name == "sqlite"
    with engine.connect() as connection:
        if sqlite and busy_timeout_ms is not None:
            _set_busy_timeout(connection, busy_timeout_ms)
        try:
            if sqlite:
                connection = connection.execution_options(**{_BEGIN_OPTION: "BEGIN IMMEDIATE"})
            with connection.begin():
                if not sqlite and busy_timeout_ms is not None:  # a row lock, e.g. FOR UPDATE
                    connection.execute(text(f"SET LOCAL lock_timeout = {int(busy_timeout_ms)}"))
                yield connection
        finally:
            if sqlite and busy_timeout_ms is not None:  # pooled: restore the default
                _set_busy_timeout(connection, SQLITE_BUSY_TIMEOUT_MS)


def delete_in_batches(
    engine: Engine, delete_batch: Callable[[Connection], int], batch_rows: int
) -> int:
    """Call ``delete_batch`` (which deletes at most ``batch_rows`` rows and returns how
    many) in write transactions of its own until a batch comes back short; the total.
    Short transactions: a writer waiting for the lock waits for one batch, not the purge."""
    deleted = 0
    while True:
        with write_transaction(engine) as connection:
            count = int(delete_batch(connection))
        deleted += count
        if count < batch_rows:
            return deleted


def _set_busy_timeout(connection: Connection, milliseconds: int) -> None:
    connection.exec_driver_sql(f"PRAGMA busy_timeout={int(milliseconds)}")
    connection.commit()


def create_tables(engine: Engine, metadata: MetaData, url: str, label: str) -> None:
    """Create ``metadata``'s tables if they are missing.

    Two processes may create them at once; the loser's error is harmless when every
    table exists afterwards, and otherwise becomes a StoreError naming the ``label``
    store (password redacted).
    """
    deadline = time.monotonic() + SQLITE_BUSY_TIMEOUT_MS / 1000
    while True:
        try:
            metadata.create_all(engine, checkfirst=True)
            return
        except Exception as exc:
            try:
                existing = inspect(engine)
                complete = all(existing.has_table(name) for name in metadata.tables)
            except Exception:  # unreachable: not a race to wait out
                raise StoreError(f"cannot open {label} store {redact(url)}: {exc}") from exc
            if complete:
                return
            # The other creator may not have committed yet (SQLite refuses a second
            # writer at once rather than waiting): try again while it finishes.
            if time.monotonic() > deadline:
                raise StoreError(f"cannot open {label} store {redact(url)}: {exc}") from exc
            time.sleep(0.05)


class TableStore:
    """A store of one set of tables (``metadata``, created when missing) in one database:
    the base of the review, monitor-state and retrain stores."""

    metadata: MetaData
    label: str  # for errors: "cannot open <label> store ..."

    def __init__(self, url: str, *, sqlite_synchronous: str = "FULL") -> None:
        self.url = url
        self.engine = create_store_engine(url, sqlite_synchronous=sqlite_synchronous)
        create_tables(self.engine, self.metadata, url, self.label)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({redact(self.url)!r})"

    def close(self) -> None:
        self.engine.dispose()


# -- store identity --------------------------------------------------------------------
#
# A service keeps its stores open for days. If the SQLite file is deleted or replaced
# under it, its open connections keep writing into the old (unlinked) file, and if a
# PostgreSQL database is dropped and re-created, the pool reconnects to the new one:
# either way writes would be acknowledged into a store nobody will ever read. Each
# database therefore carries a store id written when it is created, and a SQLite
# store remembers the device and inode of its file; both are compared before a
# write is acknowledged.


def single_value_table(name: str, column: str) -> Table:
    """A table (in its own metadata) of one row per database, ``slot`` 1, holding one
    text value of at most 64 characters in ``column``: see :func:`ensure_single_value`."""
    return Table(
        name,
        MetaData(),
        Column("slot", Integer, primary_key=True),  # always 1: one value per database
        Column(column, String(64), nullable=False),
    )


IDENTITY_TABLE = "driftgate_store_identity"
identity_table = single_value_table(IDENTITY_TABLE, "store_id")
# The write probe's row (see WriteProbe): when the store last took a probe write. In
# the identity table's metadata, so that opening a store creates both.
PROBE_TABLE = "driftgate_store_probe"
probe_table = Table(
    PROBE_TABLE,
    identity_table.metadata,
    Column("slot", Integer, primary_key=True),  # always 1
    Column("checked_us", BigInteger, nullable=False),
)
# Built once: constructing a statement costs more than running it.
_READ_STORE_ID = select(identity_table.c.store_id).where(identity_table.c.slot == 1)
# How long the readiness probe waits for SQLite's write lock before calling it locked;
# a group commit holds it for milliseconds.
PROBE_LOCK_WAIT_MS = 1_000


class StoreReplaced(StoreError):
    """The store at the URL is no longer the one that was opened (deleted or replaced)."""


@dataclass(frozen=True)
class FileIdentity:
    """Which file a SQLite store opened: its path, device and inode."""

    path: Path
    device: int
    inode: int

    @classmethod
    def of(cls, path: Path) -> FileIdentity:
        status = os.stat(path)
        return cls(path, status.st_dev, status.st_ino)

    def problem(self) -> str | None:
        """Why the path no longer holds this file, or None."""
        try:
            now = FileIdentity.of(self.path)
        except FileNotFoundError:
            return "its file was deleted"
        except OSError as exc:
            return f"its file cannot be examined ({exc.strerror})"
        if (now.device, now.inode) != (self.device, self.inode):
            return "its file was replaced by another one"
        return None


def sqlite_path(engine: Engine) -> Path | None:
    """The file of a SQLite engine (None for PostgreSQL)."""
    if engine.dialect.name != "sqlite":
        return None
    return Path(engine.url.database or "").expanduser().resolve()


def ensure_store_id(engine: Engine, url: str, label: str) -> str:
    """The database's store id, written by whichever process opens it first."""
    return ensure_single_value(engine, url, label, identity_table, lambda: uuid.uuid4().hex)


def ensure_single_value(
    engine: Engine, url: str, label: str, table: Table, fresh: Callable[[], str]
) -> str:
    """The value of ``table``'s one row (``slot`` 1 and one value column), created if
    missing; when it is absent, ``fresh()`` is written by whichever process opens the
    database first, and every other process reads that one (a racing insert loses)."""
    create_tables(engine, table.metadata, url, label)
    [value] = (c for c in table.c if c.name != "slot")
    read = select(value).where(table.c.slot == 1)
    with engine.connect() as connection:
        if (known := connection.execute(read).scalar()) is not None:
            return known  # the usual case: no write, so opening never waits for a lock
    dialect = engine.dialect.name
    insert = (postgresql.insert if dialect == "postgresql" else sqlite.insert)(table)
    with engine.begin() as connection:
        connection.execute(
            insert.values({"slot": 1, value.name: fresh()}).on_conflict_do_nothing(
                index_elements=["slot"]
            )
        )
    with engine.connect() as connection:
        return connection.execute(read).scalar()


def read_store_id(connection: Connection) -> str | None:
    """The store id of the database behind ``connection`` (None if it has none)."""
    try:
        return connection.execute(_READ_STORE_ID).scalar()
    except (OperationalError, ProgrammingError) as exc:
        if "no such table" in str(exc.orig) or "does not exist" in str(exc.orig):
            return None  # no identity table: another database
        raise


def identity_problem(
    connection: Connection, store_id: str, file: FileIdentity | None
) -> str | None:
    """Why the database behind ``connection`` is not the one with ``store_id``.

    For SQLite the file's device and inode say it (a replaced file is another inode),
    so the store id is read only for PostgreSQL.
    """
    if file is not None:
        return file.problem()
    if connection.dialect.name == "sqlite":
        return None  # the caller checks the file itself
    found = read_store_id(connection)
    if found != store_id:
        return "the database was replaced (its store id changed)"
    return None


def write_problem(engine: Engine, store_id: str, file: FileIdentity | None) -> str | None:
    """Why the store cannot take a write right now, or None — found by writing.

    ``engine`` should open a new connection per call (``pooled=False``): a pooled
    SQLite connection opened while the file or its write-ahead log was read-only
    stays read-only, and one opened before keeps a log it can no longer write, so
    neither says what a new writer would meet. The probe commits one small row
    (``driftgate_store_probe``): a rolled-back write never reaches the disk, so only
    a commit finds a full disk or a log that cannot be written.

    SQLite: the path still holds the opened file; it, its folder and its ``-wal`` /
    ``-shm`` files are writable (an immutable file refuses every new connection);
    the write lock comes within PROBE_LOCK_WAIT_MS. PostgreSQL: the database is still
    the opened one and does not run read-only (a standby,
    ``default_transaction_read_only``). Both: the commit succeeds.
    """
    if file is not None:
        if problem := file.problem():
            return problem
        if problem := _unwritable_file(file.path):
            return problem
    try:
        with write_transaction(engine, busy_timeout_ms=PROBE_LOCK_WAIT_MS) as connection:
            if problem := identity_problem(connection, store_id, None):
                return problem
            if engine.dialect.name == "postgresql":
                read_only, standby = connection.execute(
                    text("SELECT current_setting('transaction_read_only'), pg_is_in_recovery()")
                ).one()
                if read_only == "on" or standby:
                    return "the database is read-only"
            connection.execute(_probe_write(engine.dialect.name))
    except DBAPIError as exc:
        return _write_failure(engine, exc)
    return None


def _unwritable_file(path: Path) -> str | None:
    """Which of the SQLite file, its folder and its write-ahead log files is not
    writable (``-wal``/``-shm`` exist only while connections are open)."""
    candidates = [(path, "its file"), (path.parent, "its folder")]
    for suffix in ("-wal", "-shm"):
        candidates.append((Path(f"{path}{suffix}"), f"its {suffix} file ({path.name}{suffix})"))
    for candidate, name in candidates:
        if candidate.exists() and not os.access(candidate, os.W_OK):
            return f"{name} is read-only"
    return None


def _probe_write(dialect: str):
    insert = (postgresql.insert if dialect == "postgresql" else sqlite.insert)(probe_table)
    now = time.time_ns() // 1_000
    return insert.values(slot=1, checked_us=now).on_conflict_do_update(
        index_elements=["slot"], set_={"checked_us": now}
    )


def _write_failure(engine: Engine, exc: DBAPIError) -> str:
    """The probe's failure in words fit for /readyz (no statement, no parameters)."""
    message = str(exc.orig)
    lowered = message.lower()
    if "locked" in lowered or "lock timeout" in lowered:
        return f"its write lock is held by another process (waited {PROBE_LOCK_WAIT_MS} ms)"
    if "disk is full" in lowered or "no space left" in lowered or "could not extend" in lowered:
        return "its disk is full"
    sqlite = engine.dialect.name == "sqlite"
    if "readonly" in lowered or "read-only" in lowered:
        if sqlite:
            return "it opens read-only (its file, folder or -wal/-shm file is not writable)"
        return "the database is read-only"
    if sqlite:
        # SQLite's messages name the condition only ("disk I/O error"), never data.
        return f"a write to it fails ({message.splitlines()[0][:200]})"
    return "it cannot be reached"


class WriteProbe:
    """A store's write probe (:func:`write_problem`) on connections of its own, and the
    recovery of the store's pool once a problem clears.

    A SQLite connection opened while the file or its write-ahead log was read-only
    stays read-only after it is writable again, so when the probe first succeeds
    after a failure, the store's pool is disposed: its next connections are new.
    """

    def __init__(self, url: str, *, sqlite_synchronous: str = "FULL") -> None:
        self.engine = create_store_engine(url, sqlite_synchronous=sqlite_synchronous, pooled=False)
        self._had_problem = False

    def check(self, store_engine: Engine, store_id: str, file: FileIdentity | None) -> str | None:
        problem = write_problem(self.engine, store_id, file)
        if self._had_problem and problem is None:
            store_engine.dispose()  # connections opened during the problem may be read-only
        self._had_problem = problem is not None
        return problem

    def close(self) -> None:
        self.engine.dispose()
