"""Monitor state: hysteresis counts and the ledger of windows acted on.

Each monitor keeps, per model version, its count of consecutive breaching windows and
the last window it judged (``driftgate_monitor_state``, the table the review store used
to own: existing databases keep working as they are), so a re-run of an already judged
window returns the decision made then instead of counting the window twice.

The action ledger (``driftgate_monitor_actions``, created when missing) records what
each monitor's action did on each window, so acting on the same window again changes
nothing (:func:`driftgate.monitors.actions.take_action`).

Same databases as the review store: SQLite by default, PostgreSQL by URL.
"""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    and_,
    insert,
    select,
    update,
)
from sqlalchemy.exc import IntegrityError

from driftgate.monitors.actions import ActionTaken
from driftgate.monitors.rules import Firing, Monitor, MonitorResult, apply_hysteresis
from driftgate.stores._sql import create_store_engine, create_tables, redact, write_transaction

# One conversion of window times to stored microseconds, shared with the reviews.
from driftgate.stores.reviews import _iso, _us

MONITOR_STATE_TABLE = "driftgate_monitor_state"
MONITOR_ACTIONS_TABLE = "driftgate_monitor_actions"

_metadata = MetaData()
monitor_state_table = Table(
    MONITOR_STATE_TABLE,
    _metadata,
    Column("model_name", String(256), primary_key=True),
    Column("model_version", String(64), primary_key=True),
    Column("monitor", String(256), primary_key=True),
    Column("consecutive", Integer, nullable=False),
    Column("last_window_start_us", BigInteger),
    Column("last_window_end_us", BigInteger),
    Column("last_fire", Boolean, nullable=False),
)
monitor_actions_table = Table(
    MONITOR_ACTIONS_TABLE,
    _metadata,
    Column("model_name", String(256), primary_key=True),
    Column("model_version", String(64), primary_key=True),
    Column("monitor", String(256), primary_key=True),
    Column("window_start_us", BigInteger, primary_key=True),
    Column("window_end_us", BigInteger, primary_key=True),
    Column("action", String(256), nullable=False),
    Column("detail", Text, nullable=False),
    Column("review_id", String(64)),
    Column("changed", Boolean, nullable=False),
    Column("taken_at_us", BigInteger, nullable=False),
)


class MonitorStateStore:
    """Hysteresis state and the action ledger in SQLite (default) or PostgreSQL."""

    def __init__(self, url: str, *, sqlite_synchronous: str = "FULL") -> None:
        self.url = url
        self.engine = create_store_engine(url, sqlite_synchronous=sqlite_synchronous)
        create_tables(self.engine, _metadata, url, "monitor state")

    def __repr__(self) -> str:
        return f"MonitorStateStore({redact(self.url)!r})"

    def close(self) -> None:
        self.engine.dispose()

    # -- hysteresis ----------------------------------------------------------------
    def last_window_end(self, model_name: str, model_version: str, monitor: str) -> str | None:
        """End (ISO, UTC) of the last window judged for this monitor and version, if any."""
        query = select(monitor_state_table.c.last_window_end_us).where(
            and_(
                monitor_state_table.c.model_name == model_name,
                monitor_state_table.c.model_version == model_version,
                monitor_state_table.c.monitor == monitor,
            )
        )
        with self.engine.connect() as connection:
            return _iso(connection.execute(query).scalar())

    def advance(
        self,
        *,
        model_name: str,
        model_version: str,
        monitor: Monitor,
        result: MonitorResult,
        window_start: datetime | str,
        window_end: datetime | str,
    ) -> Firing:
        """Record ``result`` for this window and say whether the monitor fires.

        The window already judged last returns the decision made then; a window older
        than it changes nothing and does not fire (windows are judged in order).
        """
        start, end = _us(window_start), _us(window_end)
        key = and_(
            monitor_state_table.c.model_name == model_name,
            monitor_state_table.c.model_version == model_version,
            monitor_state_table.c.monitor == monitor.name,
        )
        with write_transaction(self.engine) as connection:
            query = select(monitor_state_table).where(key)
            if connection.dialect.name == "postgresql":
                query = query.with_for_update()
            row = connection.execute(query).mappings().first()
            if row is not None and row["last_window_end_us"] is not None:
                if (row["last_window_start_us"], row["last_window_end_us"]) == (start, end):
                    why = (
                        ""
                        if row["last_fire"] or not result.breached
                        else ("this window was judged before and did not fire then")
                    )
                    return Firing(row["consecutive"], row["last_fire"], why)
                if end <= row["last_window_end_us"]:
                    ahead = _iso(row["last_window_end_us"])
                    return Firing(
                        row["consecutive"],
                        False,
                        f"state ahead of this window: windows up to {ahead} were judged "
                        "already (a window is acted on only in time order)"
                        if result.breached
                        else "",
                    )
            firing = apply_hysteresis(monitor, result, row["consecutive"] if row else 0)
            values = {
                "consecutive": firing.consecutive,
                "last_window_start_us": start,
                "last_window_end_us": end,
                "last_fire": firing.fire,
            }
            if row is None:
                connection.execute(
                    insert(monitor_state_table).values(
                        model_name=model_name,
                        model_version=model_version,
                        monitor=monitor.name,
                        **values,
                    )
                )
            else:
                connection.execute(update(monitor_state_table).where(key).values(**values))
        return firing

    # -- action ledger ---------------------------------------------------------------
    def action_taken(
        self, model_name: str, model_version: str, monitor: str, window_start, window_end
    ) -> ActionTaken | None:
        """What the monitor's action did on this window, if it was taken."""
        query = select(monitor_actions_table).where(
            and_(
                monitor_actions_table.c.model_name == model_name,
                monitor_actions_table.c.model_version == model_version,
                monitor_actions_table.c.monitor == monitor,
                monitor_actions_table.c.window_start_us == _us(window_start),
                monitor_actions_table.c.window_end_us == _us(window_end),
            )
        )
        with self.engine.connect() as connection:
            row = connection.execute(query).mappings().first()
        if row is None:
            return None
        return ActionTaken(
            row["monitor"], row["action"], row["detail"], row["review_id"], row["changed"]
        )

    def record_action(
        self, model_name: str, model_version: str, window_start, window_end, taken: ActionTaken
    ) -> None:
        """Remember ``taken`` for this window; the first record of a window wins."""
        values = {
            "model_name": model_name,
            "model_version": model_version,
            "monitor": taken.monitor,
            "window_start_us": _us(window_start),
            "window_end_us": _us(window_end),
            "action": taken.action,
            "detail": taken.detail,
            "review_id": taken.review_id,
            "changed": taken.changed,
            "taken_at_us": _us(datetime.now(UTC)),
        }
        try:
            with write_transaction(self.engine) as connection:
                connection.execute(insert(monitor_actions_table).values(**values))
        except IntegrityError:
            # Two runs acted on the same window at once; each action is idempotent on its
            # own store, so the first record is as true as the second.
            pass
