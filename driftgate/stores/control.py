"""Control state: the durable pause switch of the inference service and its audit log.

One row per model holds the switch; every change appends an event saying who or what
acted, why, for which monitor and window, and where the evidence is. A change is one
transaction (switch and event together, or neither), so the log never disagrees with
the switch. The switch lives in a database, not in the service's memory: a pause
survives a restart of the service, and the drift-check flow or the CLI can flip it
from another process (the service re-reads it every few seconds).

Semantics:
- ``pause`` on a running service flips the switch and records the cause.
- ``pause`` while already paused keeps the *first* cause (it is what a reviewer must
  resolve); a different cause is still recorded as an event with ``changed=False``.
  The same monitor pausing for the same window again records nothing, so re-running a
  drift check is idempotent.
- ``resume`` clears the switch; resuming a running service records nothing.

SQLite by default, PostgreSQL by URL (see :mod:`driftgate.stores._sql`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import re
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime

from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    select,
    text,
)
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.exc import OperationalError

from driftgate.core.errors import DriftgateError
from driftgate.stores._sql import (
    FileIdentity,
    StoreError,
    WriteProbe,
    create_store_engine,
    create_tables,
    ensure_store_id,
    identity_problem,
    redact,
    sqlite_path,
    write_transaction,
)
from driftgate.stores._time import iso_of_us, time_of_us, to_us

log = logging.getLogger(__name__)

# -- what a switch change may carry ------------------------------------------------------
#
# Every path that writes the switch (POST /admin/pause and /resume, `driftgate pause` and
# `resume`, the drift check's pause_inference action) goes through ControlStore.pause /
# resume, which refuse what these rules forbid. Why bounds: the cause is repeated in
# every 503 a paused service answers, so 10 MB of evidence made each refusal 10 MB.
# Why no control characters: the reason and the actor are written into the service's
# log (``inference PAUSED: <reason> (by <actor>)``), where a line break or a terminal
# escape would forge a line or rewrite what an operator sees.
MAX_REASON_CHARS = 1_000  # a sentence or a short paragraph; the drift check's is one line
MAX_NAME_CHARS = 256  # by (actor), monitor, review_id: the width of their columns
MAX_EVIDENCE_LINKS = 16
MAX_LINK_CHARS = 1_024
# C0 and C1 controls (line breaks, ESC, the 8-bit CSI), Unicode line and paragraph
# separators, and the bidirectional overrides and isolates that reorder displayed text.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


class ControlValueError(DriftgateError, ValueError):
    """A value the pause switch refuses; ``field`` names it (exit code 2 on the CLI)."""

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"{field}: {problem}")
        self.field = field
        self.problem = problem


def text_problem(value: str, limit: int) -> str | None:
    """Why ``value`` cannot be written to the switch (too long, a control character),
    or None."""
    if len(value) > limit:
        return f"at most {limit:,} characters, got {len(value):,}"
    if found := _CONTROL.search(value):
        return (
            f"holds a control character (U+{ord(found.group()):04X}): line breaks and "
            "terminal escapes are refused"
        )
    return None


def evidence_problem(links: Sequence[str]) -> str | None:
    """Why a list of evidence links cannot be written to the switch, or None."""
    if len(links) > MAX_EVIDENCE_LINKS:
        return f"at most {MAX_EVIDENCE_LINKS} links, got {len(links):,}"
    for i, link in enumerate(links):
        if problem := text_problem(link, MAX_LINK_CHARS):
            return f"link {i}: {problem}"
    return None


def window_problem(start: datetime | str | None, end: datetime | str | None) -> str | None:
    """Why a pause's window cannot be written (its end not after its start), or None."""
    if start is not None and end is not None and to_us(end) <= to_us(start):
        start_text, end_text = iso_of_us(to_us(start)), iso_of_us(to_us(end))
        return f"must be after window_start ({start_text}), got {end_text}"
    return None


def fit_text(value: str, limit: int) -> str:
    """``value`` made writable: control characters escaped (a line break as ``\\x0a``) and cut
    to ``limit`` characters (the last one then ``…``). For text driftgate composes from
    data it does not control (the drift check's reason names feature columns), and for
    showing values stored before these rules."""
    text_value = _CONTROL.sub(_escaped, value[: limit + 1])
    return text_value if len(text_value) <= limit else text_value[: limit - 1] + "…"


def _escaped(match: re.Match) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def fit_cause(
    *,
    reason: str,
    actor: str,
    monitor: str | None = None,
    evidence: Sequence[str] = (),
    review_id: str | None = None,
    **rest,
) -> dict:
    """A pause's cause that driftgate composed (the drift check: its reason names the
    breached feature columns, whatever the data calls them) made to fit the rules by
    :func:`fit_text` instead of refused: a monitor's breach must pause inference."""
    return {
        "reason": fit_text(reason, MAX_REASON_CHARS),
        "actor": fit_text(actor, MAX_NAME_CHARS),
        "monitor": _fit(monitor, MAX_NAME_CHARS),
        "evidence": [fit_text(e, MAX_LINK_CHARS) for e in evidence[:MAX_EVIDENCE_LINKS]],
        "review_id": _fit(review_id, MAX_NAME_CHARS),
        **rest,
    }


def _fit(value: str | None, limit: int) -> str | None:
    return None if value is None else fit_text(value, limit)


def _check_text(field_name: str, value: str | None, limit: int) -> None:
    if value is not None and (problem := text_problem(value, limit)):
        raise ControlValueError(field_name, problem)


def _check_reason(reason: str, actor: str) -> None:
    if not reason.strip():
        raise ControlValueError("reason", "must not be blank")
    _check_text("reason", reason, MAX_REASON_CHARS)
    _check_text("by", actor, MAX_NAME_CHARS)  # the actor: `by` on every interface


PAUSE = "pause"
RESUME = "resume"
STATE_TABLE = "driftgate_pause_state"
EVENTS_TABLE = "driftgate_control_events"

_metadata = MetaData()
state_table = Table(
    STATE_TABLE,
    _metadata,
    Column("model_name", String(256), primary_key=True),
    Column("paused", Boolean, nullable=False, default=False),
    Column("reason", Text),
    Column("actor", String(256)),
    Column("monitor", String(256)),
    Column("window_start_us", BigInteger),
    Column("window_end_us", BigInteger),
    Column("evidence", Text),  # JSON list of links
    Column("review_id", String(256)),
    Column("since_us", BigInteger),
    Column("event_id", BigInteger),  # the event that set the current state
)
events_table = Table(
    EVENTS_TABLE,
    _metadata,
    Column("id", BigInteger().with_variant(Integer, "sqlite"), primary_key=True),
    Column("at_us", BigInteger, nullable=False),
    Column("model_name", String(256), nullable=False),
    Column("action", String(16), nullable=False),
    Column("changed", Boolean, nullable=False),
    Column("actor", String(256), nullable=False),
    Column("reason", Text, nullable=False),
    Column("monitor", String(256)),
    Column("window_start_us", BigInteger),
    Column("window_end_us", BigInteger),
    Column("evidence", Text),
    Column("review_id", String(256)),
    Index(f"ix_{EVENTS_TABLE}_model", "model_name", "id"),
)


def _iso(moment: datetime | None) -> str | None:
    return moment.isoformat() if moment is not None else None


@dataclass(frozen=True)
class PauseState:
    """Whether inference of a model is paused, and the cause of the current pause.

    Attributes:
        model_name: The registered model the switch belongs to.
        paused: True while prediction requests must be refused.
        reason: Why (for a pause: shown to every refused client).
        actor: Who or what paused (``monitor:<name>``, ``cli:<user>``, ``http:<addr>``).
        monitor: The monitor whose breach paused it, if any.
        window_start: Start of the window that breached, if any.
        window_end: End of that window.
        evidence: Links to the evidence (MLflow run, report files).
        review_id: The review a person must resolve, if one was opened.
        since: When the switch took its current position.
    """

    model_name: str
    paused: bool = False
    reason: str | None = None
    actor: str | None = None
    monitor: str | None = None
    window_start: datetime | None = None
    window_end: datetime | None = None
    evidence: tuple[str, ...] = ()
    review_id: str | None = None
    since: datetime | None = None

    def to_dict(self) -> dict:
        data = asdict(self)
        data.update(
            window_start=_iso(self.window_start),
            window_end=_iso(self.window_end),
            since=_iso(self.since),
            evidence=list(self.evidence),
        )
        return data

    def shown(self) -> PauseState:
        """This state within the bounds the switch now enforces, control characters
        escaped: what a 503 or a log line may repeat of a state stored before them."""
        return dataclasses.replace(
            self,
            reason=_fit(self.reason, MAX_REASON_CHARS),
            actor=_fit(self.actor, MAX_NAME_CHARS),
            monitor=_fit(self.monitor, MAX_NAME_CHARS),
            review_id=_fit(self.review_id, MAX_NAME_CHARS),
            evidence=tuple(fit_text(e, MAX_LINK_CHARS) for e in self.evidence[:MAX_EVIDENCE_LINKS]),
        )


@dataclass(frozen=True)
class ControlEvent:
    """One entry of the audit log; ``changed`` says whether the switch flipped."""

    id: int
    at: datetime
    model_name: str
    action: str
    changed: bool
    actor: str
    reason: str
    monitor: str | None = None
    window_start: datetime | None = None
    window_end: datetime | None = None
    evidence: tuple[str, ...] = field(default=())
    review_id: str | None = None

    def to_dict(self) -> dict:
        data = asdict(self)
        data.update(
            at=_iso(self.at),
            window_start=_iso(self.window_start),
            window_end=_iso(self.window_end),
            evidence=list(self.evidence),
        )
        return data


@dataclass(frozen=True)
class SwitchChange:
    """What a pause or resume call did: the state after it, and the event (if any)."""

    state: PauseState
    changed: bool
    event: ControlEvent | None


def _evidence(text_value: str | None) -> tuple[str, ...]:
    return tuple(json.loads(text_value)) if text_value else ()


class ControlStore:
    """The pause switch and audit log in SQLite (default) or PostgreSQL.

    Args:
        url: ``sqlite:///PATH`` or ``postgresql://USER@HOST/DB``.
        sqlite_synchronous: ``FULL`` or ``NORMAL``; see :mod:`driftgate.stores._sql`.
    """

    def __init__(self, url: str, *, sqlite_synchronous: str = "FULL") -> None:
        self.url = url
        self._sqlite_synchronous = sqlite_synchronous
        self._probe = WriteProbe(url, sqlite_synchronous=sqlite_synchronous)
        self._open()

    def _open(self) -> None:
        self.engine = create_store_engine(self.url, sqlite_synchronous=self._sqlite_synchronous)
        create_tables(self.engine, _metadata, self.url, "control")
        self.store_id = ensure_store_id(self.engine, self.url, "control")
        path = sqlite_path(self.engine)
        self.file = FileIdentity.of(path) if path is not None else None

    def follow_replacement(self) -> str | None:
        """Reopen the store if the URL now names another database than the one opened.

        The switch is the one at the URL: when ``driftgate pause`` writes a file that
        replaced a deleted one, or a re-created database, a long-running reader must
        read that one, not the unlinked file it still holds open. Returns why the
        store cannot be read (its file was deleted and not re-created), else None.
        """
        if self.file is not None:
            problem = self.file.problem()
            if problem is None:
                return None
            if not self.file.path.exists():
                return f"control store {redact(self.url)}: {problem}"
        else:
            with self.engine.connect() as connection:
                problem = identity_problem(connection, self.store_id, None)
            if problem is None:
                return None
        log.warning("control store %s: %s; reopening it", redact(self.url), problem)
        previous = self.engine
        self._open()
        previous.dispose()
        return None

    def write_problem(self) -> str | None:
        """Why the switch cannot be written right now, or None (commits one probe row on
        a connection of its own; see :class:`~driftgate.stores._sql.WriteProbe`)."""
        return self._probe.check(self.engine, self.store_id, self.file)

    def __repr__(self) -> str:
        return f"ControlStore({redact(self.url)!r})"

    # -- reading -----------------------------------------------------------------

    def state(self, model_name: str) -> PauseState:
        """The switch of ``model_name``; never paused if nothing was ever recorded."""
        with self.engine.connect() as connection:
            row = (
                connection.execute(
                    select(state_table).where(state_table.c.model_name == model_name)
                )
                .mappings()
                .first()
            )
        return self._state(model_name, row)

    def events(self, model_name: str | None = None, limit: int = 100) -> list[ControlEvent]:
        """The newest ``limit`` audit events (of one model, or all), newest first."""
        query = select(events_table).order_by(events_table.c.id.desc()).limit(limit)
        if model_name is not None:
            query = query.where(events_table.c.model_name == model_name)
        with self.engine.connect() as connection:
            rows = connection.execute(query).mappings().all()
        return [self._event(row) for row in rows]

    def ping(self) -> None:
        with self.engine.connect() as connection:
            connection.execute(text("SELECT 1"))

    def close(self) -> None:
        self.engine.dispose()
        self._probe.close()

    @contextlib.contextmanager
    def exclusive(self, name: str, timeout_s: float = 60.0) -> Iterator[None]:
        """Run the block holding the lock ``name``: one holder at a time, across
        processes and machines that share this store.

        The lock is a transaction: on PostgreSQL an advisory transaction lock, on
        SQLite the database's write lock (``BEGIN IMMEDIATE``). A holder that crashes
        loses its connection and with it the lock, so a lock is never left behind.
        Waiting longer than ``timeout_s`` raises StoreError.
        """
        try:
            with write_transaction(
                self.engine, busy_timeout_ms=int(timeout_s * 1000)
            ) as connection:
                if connection.dialect.name == "postgresql":
                    connection.execute(text(f"SET LOCAL lock_timeout = {int(timeout_s * 1000)}"))
                    connection.execute(
                        text("SELECT pg_advisory_xact_lock(hashtext(:name))"), {"name": name}
                    )
                yield
        except OperationalError as exc:
            if "locked" in str(exc) or "lock timeout" in str(exc):
                raise StoreError(
                    f"lock '{name}' in {redact(self.url)} is held by another process "
                    f"(waited {timeout_s:g} s)"
                ) from exc
            raise

    # -- writing -----------------------------------------------------------------

    def pause(
        self,
        model_name: str,
        *,
        reason: str,
        actor: str,
        monitor: str | None = None,
        window_start: datetime | str | None = None,
        window_end: datetime | str | None = None,
        evidence: Sequence[str] = (),
        review_id: str | None = None,
        lock_wait_ms: int | None = None,
    ) -> SwitchChange:
        """Pause inference of ``model_name`` (see the module doc for repeated pauses).

        ``lock_wait_ms`` bounds the wait for another writer (default: the store's).
        """
        _check_reason(reason, actor)
        _check_text("monitor", monitor, MAX_NAME_CHARS)
        _check_text("review_id", review_id, MAX_NAME_CHARS)
        if problem := evidence_problem(evidence):
            raise ControlValueError("evidence", problem)
        if problem := window_problem(window_start, window_end):
            raise ControlValueError("window_end", problem)
        cause = {
            "reason": reason,
            "actor": actor,
            "monitor": monitor,
            "window_start_us": to_us(window_start),
            "window_end_us": to_us(window_end),
            "evidence": json.dumps(list(evidence)),
            "review_id": review_id,
        }
        with write_transaction(self.engine, lock_wait_ms) as connection:
            current = self._locked_row(connection, model_name)
            if current["paused"]:
                same_cause = monitor is not None and (
                    current["monitor"],
                    current["window_start_us"],
                    current["window_end_us"],
                ) == (monitor, cause["window_start_us"], cause["window_end_us"])
                if same_cause:
                    return SwitchChange(self._state(model_name, current), False, None)
                event = self._append_event(connection, model_name, PAUSE, False, cause)
                return SwitchChange(self._state(model_name, current), False, event)
            event = self._append_event(connection, model_name, PAUSE, True, cause)
            updated = {**cause, "paused": True, "since_us": to_us(event.at), "event_id": event.id}
            self._update_row(connection, model_name, updated)
        return SwitchChange(self._state(model_name, {**current, **updated}), True, event)

    def resume(
        self, model_name: str, *, reason: str, actor: str, lock_wait_ms: int | None = None
    ) -> SwitchChange:
        """Resume inference of ``model_name``; a no-op (no event) if it is not paused."""
        _check_reason(reason, actor)
        with write_transaction(self.engine, lock_wait_ms) as connection:
            current = self._locked_row(connection, model_name)
            if not current["paused"]:
                return SwitchChange(self._state(model_name, current), False, None)
            # The event keeps the cause it resolves, so the log reads on its own.
            cause = {
                "reason": reason,
                "actor": actor,
                "monitor": current["monitor"],
                "window_start_us": current["window_start_us"],
                "window_end_us": current["window_end_us"],
                "evidence": current["evidence"],
                "review_id": current["review_id"],
            }
            event = self._append_event(connection, model_name, RESUME, True, cause)
            cleared = {
                "paused": False,
                "reason": reason,
                "actor": actor,
                "monitor": None,
                "window_start_us": None,
                "window_end_us": None,
                "evidence": None,
                "review_id": None,
                "since_us": to_us(event.at),
                "event_id": event.id,
            }
            self._update_row(connection, model_name, cleared)
        return SwitchChange(self._state(model_name, {**current, **cleared}), True, event)

    # -- internals ---------------------------------------------------------------

    def _locked_row(self, connection, model_name: str) -> dict:
        """The model's state row, created if missing, locked until the transaction ends."""
        dialect = self.engine.dialect.name
        insert = (postgresql.insert if dialect == "postgresql" else sqlite.insert)(state_table)
        connection.execute(
            insert.values(model_name=model_name, paused=False).on_conflict_do_nothing(
                index_elements=["model_name"]
            )
        )
        # FOR UPDATE on PostgreSQL; SQLite already holds the write lock (BEGIN IMMEDIATE).
        query = select(state_table).where(state_table.c.model_name == model_name)
        row = connection.execute(query.with_for_update()).mappings().one()
        return dict(row)

    @staticmethod
    def _update_row(connection, model_name: str, values: dict) -> None:
        connection.execute(
            state_table.update().where(state_table.c.model_name == model_name).values(**values)
        )

    def _append_event(
        self, connection, model_name: str, action: str, changed: bool, cause: dict
    ) -> ControlEvent:
        at_us = to_us(datetime.now(UTC))
        values = {"at_us": at_us, "model_name": model_name, "action": action, "changed": changed}
        values |= cause
        event_id = connection.execute(events_table.insert().values(**values)).inserted_primary_key[
            0
        ]
        return self._event({"id": event_id, **values})

    @staticmethod
    def _state(model_name: str, row) -> PauseState:
        if row is None:
            return PauseState(model_name=model_name)
        return PauseState(
            model_name=model_name,
            paused=bool(row["paused"]),
            reason=row["reason"],
            actor=row["actor"],
            monitor=row["monitor"],
            window_start=time_of_us(row["window_start_us"]),
            window_end=time_of_us(row["window_end_us"]),
            evidence=_evidence(row["evidence"]),
            review_id=row["review_id"],
            since=time_of_us(row["since_us"]),
        )

    @staticmethod
    def _event(row) -> ControlEvent:
        return ControlEvent(
            id=int(row["id"]),
            at=time_of_us(row["at_us"]),
            model_name=row["model_name"],
            action=row["action"],
            changed=bool(row["changed"]),
            actor=row["actor"],
            reason=row["reason"],
            monitor=row["monitor"],
            window_start=time_of_us(row["window_start_us"]),
            window_end=time_of_us(row["window_end_us"]),
            evidence=_evidence(row["evidence"]),
            review_id=row["review_id"],
        )
