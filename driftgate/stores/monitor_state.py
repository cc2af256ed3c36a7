"""Monitor state: hysteresis counts and the ledger of windows acted on.

Each monitor keeps, per model version, its count of consecutive breaching windows and
the last window it judged (``driftgate_monitor_state``, the table the review store used
to own: existing databases keep working as they are), so a re-run of an already judged
window returns the decision made then instead of counting the window twice.

The action ledger (``driftgate_monitor_actions``, created when missing) records what
each monitor's action did on each window, so acting on the same window again changes
nothing (:func:`driftgate.monitors.actions.take_action`).

Performance monitors (``performance:<metric>``) keep one row per judged window
(``driftgate_performance_windows``, created when missing) instead: a window's labels
arrive after it was first judged, so its verdict may change, and the drift check
judges it again when it has more labels (:meth:`MonitorStateStore.rejudgeable`).
Their hysteresis counts breaching windows in *window* order over these rows, whatever
order they were judged in, so a window judged again is counted once, with its latest
verdict; the action ledger still acts at most once per window.

The latest verdict of each monitor (``driftgate_monitor_status``, created when missing:
status, breached, fired, observed value, p-value and level of the newest window judged)
is what the service shows on ``/metrics``, so a dashboard sees a monitor that is
``insufficient_data`` as such instead of as a quiet pass.

Same databases as the review store: SQLite by default, PostgreSQL by URL.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime

from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    Float,
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
from driftgate.monitors.hysteresis import Firing, apply_hysteresis
from driftgate.monitors.rules import Monitor, MonitorResult
from driftgate.stores._sql import TableStore, write_transaction

# One conversion of window times to stored microseconds, shared with the reviews.
from driftgate.stores._time import iso_of_us, to_us

MONITOR_STATE_TABLE = "driftgate_monitor_state"
MONITOR_ACTIONS_TABLE = "driftgate_monitor_actions"
PERFORMANCE_WINDOWS_TABLE = "driftgate_performance_windows"
MONITOR_STATUS_TABLE = "driftgate_monitor_status"

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
performance_windows_table = Table(
    PERFORMANCE_WINDOWS_TABLE,
    _metadata,
    Column("model_name", String(256), primary_key=True),
    Column("model_version", String(64), primary_key=True),
    Column("monitor", String(256), primary_key=True),
    Column("window_start_us", BigInteger, primary_key=True),
    Column("window_end_us", BigInteger, primary_key=True),
    Column("labels", Integer, nullable=False),  # labelled records when last judged
    Column("status", String(32), nullable=False),
    Column("breached", Boolean, nullable=False),
    Column("judged_at_us", BigInteger, nullable=False),
)

# The newest window judged per model and monitor, whatever the version: the service
# serves the champion by name and labels the gauges with the version judged.
monitor_status_table = Table(
    MONITOR_STATUS_TABLE,
    _metadata,
    Column("model_name", String(256), primary_key=True),
    Column("monitor", String(256), primary_key=True),
    Column("model_version", String(64), nullable=False),
    Column("metric", String(256), nullable=False),
    Column("window_start_us", BigInteger, nullable=False),
    Column("window_end_us", BigInteger, nullable=False),
    Column("status", String(32), nullable=False),
    Column("breached", Boolean, nullable=False),
    Column("fired", Boolean, nullable=False),
    Column("observed", Float),
    Column("p_value", Float),
    Column("level", Float),
    Column("judged_at_us", BigInteger, nullable=False),
)


class MonitorStateStore(TableStore):
    """Hysteresis state and the action ledger in SQLite (default) or PostgreSQL."""

    metadata, label = _metadata, "monitor state"

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
            return iso_of_us(connection.execute(query).scalar())

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
        start, end = to_us(window_start), to_us(window_end)
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
                    ahead = iso_of_us(row["last_window_end_us"])
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

    # -- performance monitors: one row per window, judged again as labels arrive ------
    def advance_performance(
        self,
        *,
        model_name: str,
        model_version: str,
        monitor: Monitor,
        result: MonitorResult,
        window_start: datetime | str,
        window_end: datetime | str,
    ) -> Firing:
        """Record the latest verdict on this window and say whether the monitor fires.

        Consecutive breaches are counted in window order up to this window, over the
        windows evaluated (``ok``); windows without enough labels neither count nor
        reset, as in :func:`monitors.rules.apply_hysteresis`. The monitor's row in the
        hysteresis table follows the newest window, so catch-up planning sees it.
        """
        start, end = to_us(window_start), to_us(window_end)
        table = performance_windows_table
        key = and_(
            table.c.model_name == model_name,
            table.c.model_version == model_version,
            table.c.monitor == monitor.name,
        )
        this = and_(key, table.c.window_start_us == start, table.c.window_end_us == end)
        values = {
            "labels": int(result.labels or 0),
            "status": result.status,
            "breached": bool(result.breached),
            "judged_at_us": to_us(datetime.now(UTC)),
        }
        with write_transaction(self.engine) as connection:
            if connection.execute(select(table.c.labels).where(this)).first() is None:
                connection.execute(
                    insert(table).values(
                        model_name=model_name,
                        model_version=model_version,
                        monitor=monitor.name,
                        window_start_us=start,
                        window_end_us=end,
                        **values,
                    )
                )
            else:
                connection.execute(update(table).where(this).values(**values))
            earlier = connection.execute(
                select(table.c.status, table.c.breached)
                .where(key, table.c.window_start_us <= start)
                .order_by(table.c.window_start_us.desc())
            ).all()
            consecutive = 0
            for status, breached in earlier:
                if status != "ok":
                    continue
                if not breached:
                    break
                consecutive += 1
            fire = result.status == "ok" and result.breached
            fire = fire and consecutive >= monitor.consecutive_breaches
            self._follow_newest(connection, model_name, model_version, monitor, start, end,
                                consecutive, fire)  # fmt: skip
        why = ""
        if result.status == "ok" and result.breached and not fire:
            why = (
                f"hysteresis: breach {consecutive} of {monitor.consecutive_breaches} in a row "
                "needed to fire"
            )
        return Firing(consecutive, fire, why)

    def _follow_newest(self, connection, model_name, model_version, monitor, start, end,
                       consecutive, fire) -> None:  # fmt: skip
        key = and_(
            monitor_state_table.c.model_name == model_name,
            monitor_state_table.c.model_version == model_version,
            monitor_state_table.c.monitor == monitor.name,
        )
        row = connection.execute(
            select(monitor_state_table.c.last_window_end_us).where(key)
        ).first()
        values = {
            "consecutive": consecutive,
            "last_window_start_us": start,
            "last_window_end_us": end,
            "last_fire": fire,
        }
        if row is None:
            connection.execute(
                insert(monitor_state_table).values(
                    model_name=model_name, model_version=model_version, monitor=monitor.name,
                    **values,
                )
            )  # fmt: skip
        elif row[0] is None or end >= row[0]:
            connection.execute(update(monitor_state_table).where(key).values(**values))

    def rejudgeable(
        self, model_name: str, model_version: str, monitor: str, ending_after
    ) -> list[tuple[str, str, int]]:
        """(start, end, labels when last judged) of the performance monitor's windows
        that end after ``ending_after`` (None: all), oldest first."""
        table = performance_windows_table
        query = (
            select(table.c.window_start_us, table.c.window_end_us, table.c.labels)
            .where(
                table.c.model_name == model_name,
                table.c.model_version == model_version,
                table.c.monitor == monitor,
            )
            .order_by(table.c.window_start_us)
        )
        if ending_after is not None:
            query = query.where(table.c.window_end_us > to_us(ending_after))
        with self.engine.connect() as connection:
            return [(iso_of_us(a), iso_of_us(b), int(n)) for a, b, n in connection.execute(query)]

    # -- latest verdicts (for /metrics) ----------------------------------------------
    def record_status(
        self,
        *,
        model_name: str,
        model_version: str,
        result: MonitorResult,
        firing: Firing,
        window_start: datetime | str,
        window_end: datetime | str,
    ) -> None:
        """Keep ``result`` as the monitor's latest verdict unless a newer window was
        judged already (a catch-up of older windows does not overwrite it)."""
        start, end = to_us(window_start), to_us(window_end)
        table = monitor_status_table
        key = and_(table.c.model_name == model_name, table.c.monitor == result.monitor)
        values = {
            "model_version": model_version,
            "metric": result.metric,
            "window_start_us": start,
            "window_end_us": end,
            "status": result.status,
            "breached": bool(result.breached),
            "fired": bool(firing.fire),
            "observed": _finite_or_none(result.observed),
            "p_value": _finite_or_none(result.p_value),
            "level": _finite_or_none(result.level),
            "judged_at_us": to_us(datetime.now(UTC)),
        }
        with write_transaction(self.engine) as connection:
            row = connection.execute(select(table.c.window_end_us).where(key)).first()
            if row is None:
                connection.execute(
                    insert(table).values(model_name=model_name, monitor=result.monitor, **values)
                )
            elif end >= row[0]:
                connection.execute(update(table).where(key).values(**values))

    def latest_statuses(self, model_name: str) -> list[dict]:
        """Each monitor's latest verdict for ``model_name``, by monitor name."""
        table = monitor_status_table
        query = select(table).where(table.c.model_name == model_name).order_by(table.c.monitor)
        with self.engine.connect() as connection:
            rows = connection.execute(query).mappings().all()
        return [
            {
                **{k: v for k, v in row.items() if not k.endswith("_us")},
                "window_start": iso_of_us(row["window_start_us"]),
                "window_end": iso_of_us(row["window_end_us"]),
                "window_end_seconds": row["window_end_us"] / 1e6,
            }
            for row in rows
        ]

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
                monitor_actions_table.c.window_start_us == to_us(window_start),
                monitor_actions_table.c.window_end_us == to_us(window_end),
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
            "window_start_us": to_us(window_start),
            "window_end_us": to_us(window_end),
            "action": taken.action,
            "detail": taken.detail,
            "review_id": taken.review_id,
            "changed": taken.changed,
            "taken_at_us": to_us(datetime.now(UTC)),
        }
        try:
            with write_transaction(self.engine) as connection:
                connection.execute(insert(monitor_actions_table).values(**values))
        except IntegrityError:
            # Two runs acted on the same window at once; each action is idempotent on its
            # own store, so the first record is as true as the second.
            pass


def _finite_or_none(value: float | None) -> float | None:
    return None if value is None or not math.isfinite(value) else float(value)
