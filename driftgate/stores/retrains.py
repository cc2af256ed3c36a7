"""Retrains started by the ``retrain`` monitor action: at most one in flight per model.

One row per retrain (``driftgate_retrains``): the model, the champion and the monitor
and window that asked for it, the review it answers, where it runs (a Prefect flow run
or in process), and its outcome (the candidate version, its MLflow run, the gate report,
promoted or not).

Two unique indexes make the guarantees the database's, not the caller's, so they hold
across processes, machines and restarts:

- one row per model, monitor and window: the same breach asks for a retrain once, ever;
- one row per model with status ``in_flight`` (a partial unique index): a second breach
  while a retrain runs finds it and starts nothing.

An in-flight row carries a lease (``expires_at``, wall-clock time): a retrain whose
process died never finishes its row, so a claim that finds an expired one marks it
``expired`` and takes the slot. A cooldown, when asked for, is event time: the
breaching window's end against the window end of the model's last retrain that
reached an outcome (:meth:`RetrainStore.claim`). Same databases as the reviews: SQLite
by default, PostgreSQL by URL.
"""

from __future__ import annotations

import uuid
from dataclasses import asdict, dataclass
from datetime import UTC, datetime, timedelta

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
    and_,
    insert,
    select,
    text,
    update,
)
from sqlalchemy.exc import IntegrityError

from driftgate.stores._sql import (
    StoreError,
    TableStore,
    write_transaction,
)
from driftgate.stores._time import iso_of_us, to_us

RETRAINS_TABLE = "driftgate_retrains"
IN_FLIGHT, DONE, FAILED, EXPIRED = "in_flight", "done", "failed", "expired"

_metadata = MetaData()
retrains_table = Table(
    RETRAINS_TABLE,
    _metadata,
    Column("id", String(64), primary_key=True),
    Column("model_name", String(256), nullable=False),
    Column("champion_version", String(64), nullable=False),
    Column("monitor", String(256), nullable=False),
    Column("window_start_us", BigInteger, nullable=False),
    Column("window_end_us", BigInteger, nullable=False),
    Column("review_id", String(64)),
    Column("status", String(16), nullable=False),
    Column("started_at_us", BigInteger, nullable=False),
    Column("expires_at_us", BigInteger, nullable=False),
    Column("finished_at_us", BigInteger),
    Column("launcher", String(32)),  # "prefect" or "local"
    Column("flow_run_id", String(64)),
    Column("run_id", String(64)),  # the candidate's MLflow training run
    Column("candidate_version", String(64)),
    Column("passed", Boolean),
    Column("promoted", Boolean),
    Column("gate_report", Text),
    Column("detail", Text),
    # approval: required: seconds the candidate waits for a person, and the decision
    Column("approval_timeout_s", Integer),
    Column("decision", String(16)),  # approved, rejected, timed out
    Column("decided_by", String(256)),
    Column("decision_reason", Text),
    Index(
        f"ux_{RETRAINS_TABLE}_breach",
        "model_name",
        "monitor",
        "window_start_us",
        "window_end_us",
        unique=True,
    ),
    Index(
        f"ux_{RETRAINS_TABLE}_in_flight",
        "model_name",
        unique=True,
        sqlite_where=text("status = 'in_flight'"),
        postgresql_where=text("status = 'in_flight'"),
    ),
)


@dataclass(frozen=True)
class Retrain:
    id: str
    model_name: str
    champion_version: str
    monitor: str
    window: tuple[str, str]
    review_id: str | None
    status: str
    started_at: str
    expires_at: str
    finished_at: str | None = None
    launcher: str | None = None
    flow_run_id: str | None = None
    run_id: str | None = None
    candidate_version: str | None = None
    passed: bool | None = None
    promoted: bool | None = None
    gate_report: str | None = None
    detail: str | None = None
    approval_timeout_s: int | None = None
    decision: str | None = None
    decided_by: str | None = None
    decision_reason: str | None = None

    def to_dict(self) -> dict:
        return asdict(self)

    @property
    def outcome(self) -> str:
        """One line for people: where it runs or how it ended."""
        where = f"Prefect flow run {self.flow_run_id}" if self.flow_run_id else "in process"
        if self.status == IN_FLIGHT:
            return f"retrain {self.id} in flight since {self.started_at} ({where})"
        if self.status == DONE:
            if self.promoted:
                verdict = "promoted to champion"
            elif not self.passed:
                verdict = "not promoted (gate failed)"
            else:
                verdict = f"passed the gate, not promoted: {self.detail or self.decision or '-'}"
            if self.decision:
                verdict += f" ({self.decision} by {self.decided_by}: {self.decision_reason})"
            return f"retrain {self.id}: candidate v{self.candidate_version} {verdict}"
        return f"retrain {self.id} {self.status}: {self.detail or '-'}"


@dataclass(frozen=True)
class Claim:
    """``started``: this call took the slot; otherwise ``retrain`` is the one that holds
    it (in flight) or that this breach already asked for."""

    retrain: Retrain
    started: bool


def _retrain(row) -> Retrain:
    return Retrain(
        id=row["id"],
        model_name=row["model_name"],
        champion_version=row["champion_version"],
        monitor=row["monitor"],
        window=(iso_of_us(row["window_start_us"]), iso_of_us(row["window_end_us"])),
        review_id=row["review_id"],
        status=row["status"],
        started_at=iso_of_us(row["started_at_us"]),
        expires_at=iso_of_us(row["expires_at_us"]),
        finished_at=iso_of_us(row["finished_at_us"]),
        launcher=row["launcher"],
        flow_run_id=row["flow_run_id"],
        run_id=row["run_id"],
        candidate_version=row["candidate_version"],
        passed=row["passed"],
        promoted=row["promoted"],
        gate_report=row["gate_report"],
        detail=row["detail"],
        approval_timeout_s=row["approval_timeout_s"],
        decision=row["decision"],
        decided_by=row["decided_by"],
        decision_reason=row["decision_reason"],
    )


def _row(connection, retrain_id: str):
    row = (
        connection.execute(select(retrains_table).where(retrains_table.c.id == retrain_id))
        .mappings()
        .first()
    )
    if row is None:
        raise StoreError(f"no retrain with id '{retrain_id}'")
    return row


def _now_us() -> int:
    return to_us(datetime.now(UTC))


class RetrainStore(TableStore):
    """Retrains in SQLite (default) or PostgreSQL."""

    metadata, label = _metadata, "retrain"

    def claim(
        self,
        *,
        model_name: str,
        champion_version: str,
        monitor: str,
        window_start,
        window_end,
        review_id: str | None,
        lease: timedelta,
        approval_timeout_s: int | None = None,
        cooldown: timedelta | None = None,
    ) -> Claim:
        """Take the model's retrain slot for this breach, or say who holds it.

        Returns the existing row, not started, when this breach asked before (whatever
        its status), another retrain of the model is in flight and its lease has not
        expired (an expired one is marked ``expired`` first and the slot is taken), or,
        with ``cooldown``, one of the model's retrains that reached an outcome has a
        window ending less than ``cooldown`` before this breach's window ends (a failed
        or expired one does not count).

        The cooldown is **event time**: the windows' own time, compared window end to
        window end, never the clock. A replay judging a year of windows in minutes, or a
        catch-up after an outage, then retrains as often as live operation would; by the
        clock, a 30-day cooldown blocked every later breach of the replayed year. A
        breaching window that ends before the last retrain's window (judged late) is
        within it too: the model already learnt from later data.

        The lease stays **wall-clock** time (``lease`` from now): it answers "is the
        process running this retrain still alive?", a question of the clock. In event
        time a replay would expire a retrain still training after a few windows and
        start a second one of the same model beside it.
        """
        start, end, now = to_us(window_start), to_us(window_end), _now_us()
        table = retrains_table
        breach = and_(
            table.c.model_name == model_name,
            table.c.monitor == monitor,
            table.c.window_start_us == start,
            table.c.window_end_us == end,
        )
        in_flight = and_(table.c.model_name == model_name, table.c.status == IN_FLIGHT)
        latest = table.c.started_at_us.desc()
        conditions = [(breach, latest), (in_flight, latest)]
        if cooldown is not None:
            # Only a retrain that reached an outcome (a candidate judged by the gate)
            # holds the cooldown: a failed or expired one taught nothing, and holding
            # it kept every later breach from retraining after one crash.
            since = end - int(cooldown / timedelta(microseconds=1))
            cooling = and_(
                table.c.model_name == model_name,
                table.c.status == DONE,
                table.c.window_end_us > since,
            )
            conditions.append((cooling, table.c.window_end_us.desc()))
        values = {
            "id": f"rt-{uuid.uuid4().hex[:12]}",
            "model_name": model_name,
            "champion_version": champion_version,
            "monitor": monitor,
            "window_start_us": start,
            "window_end_us": end,
            "review_id": review_id,
            "status": IN_FLIGHT,
            "started_at_us": now,
            "expires_at_us": now + int(lease / timedelta(microseconds=1)),
            "approval_timeout_s": approval_timeout_s,
        }
        try:
            with write_transaction(self.engine) as connection:
                for condition, order in conditions:
                    query = select(table).where(condition).order_by(order)
                    if connection.dialect.name == "postgresql":
                        query = query.with_for_update()
                    row = connection.execute(query).mappings().first()
                    if row is None:
                        continue
                    if row["status"] == IN_FLIGHT and row["expires_at_us"] <= now:
                        row = self._expire(connection, row, now)
                        if condition is in_flight:
                            continue  # the dead retrain's slot is free
                    return Claim(_retrain(row), started=False)
                connection.execute(insert(table).values(**values))
        except IntegrityError:
            # Another process claimed between our read and our insert (PostgreSQL reads
            # without SQLite's write lock): its row is the answer.
            with self.engine.connect() as connection:
                row = connection.execute(
                    select(table).where(breach | in_flight).order_by(table.c.started_at_us.desc())
                ).mappings().first()  # fmt: skip
            if row is None:
                raise
            return Claim(_retrain(row), started=False)
        return Claim(_retrain(values | {"finished_at_us": None} | _EMPTY), started=True)

    @staticmethod
    def _expire(connection, row, now: int) -> dict:
        detail = f"lease expired at {iso_of_us(row['expires_at_us'])} without an outcome"
        if row["flow_run_id"]:
            detail += f" (Prefect flow run {row['flow_run_id']})"
        values = {"status": EXPIRED, "finished_at_us": now, "detail": detail}
        connection.execute(
            update(retrains_table).where(retrains_table.c.id == row["id"]).values(**values)
        )
        return {**row, **values}

    def launched(self, retrain_id: str, *, launcher: str, flow_run_id: str | None = None) -> None:
        """Record where the retrain runs (a Prefect flow run id, or in process)."""
        self._update(retrain_id, launcher=launcher, flow_run_id=flow_run_id)

    def finish(
        self,
        retrain_id: str,
        *,
        run_id: str,
        candidate_version: str,
        passed: bool,
        promoted: bool,
        gate_report: str,
        detail: str | None = None,
    ) -> Retrain:
        """The outcome: the candidate, its run and gate report; frees the model's slot."""
        return self._update(
            retrain_id,
            status=DONE,
            finished_at_us=_now_us(),
            run_id=run_id,
            candidate_version=candidate_version,
            passed=passed,
            promoted=promoted,
            gate_report=gate_report,
            detail=detail,
        )

    def decide(self, retrain_id: str, *, decision: str, by: str, reason: str) -> Retrain:
        """A person's decision on a candidate that passed the gate (approval: required)."""
        return self._update(retrain_id, decision=decision, decided_by=by, decision_reason=reason)

    def fail(self, retrain_id: str, detail: str) -> Retrain:
        """The retrain failed before an outcome; frees the model's slot."""
        return self._update(retrain_id, status=FAILED, finished_at_us=_now_us(), detail=detail)

    def _update(self, retrain_id: str, **values) -> Retrain:
        table = retrains_table
        with write_transaction(self.engine) as connection:
            row = _row(connection, retrain_id)
            connection.execute(update(table).where(table.c.id == retrain_id).values(**values))
        return _retrain({**row, **values})

    def get(self, retrain_id: str) -> Retrain:
        with self.engine.connect() as connection:
            return _retrain(_row(connection, retrain_id))

    def list(self, model_name: str | None = None) -> list[Retrain]:
        """Retrains, newest first (of one model, or all)."""
        query = select(retrains_table).order_by(retrains_table.c.started_at_us.desc())
        if model_name is not None:
            query = query.where(retrains_table.c.model_name == model_name)
        with self.engine.connect() as connection:
            return [_retrain(row) for row in connection.execute(query).mappings()]


_EMPTY = {
    "launcher": None,
    "flow_run_id": None,
    "run_id": None,
    "candidate_version": None,
    "passed": None,
    "promoted": None,
    "gate_report": None,
    "detail": None,
    "decision": None,
    "decided_by": None,
    "decision_reason": None,
}
