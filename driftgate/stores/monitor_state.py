"""Monitor state: hysteresis counts.

Each monitor keeps, per model version, its count of consecutive breaching windows and
the last window it judged (``driftgate_monitor_state``, the table the review store used
to own: existing databases keep working as they are), so a re-run of an already judged
window returns the decision made then instead of counting the window twice.

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
    and_,
    insert,
    select,
    update,
)

from driftgate.monitors.rules import Firing, Monitor, MonitorResult, apply_hysteresis
from driftgate.stores._sql import create_store_engine, create_tables, redact, write_transaction
from driftgate.stores.samples import to_utc

MONITOR_STATE_TABLE = "driftgate_monitor_state"

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


def _us(moment: datetime | str | None) -> int | None:
    return None if moment is None else to_utc(moment).value // 1000


def _iso(us: int | None) -> str | None:
    return None if us is None else datetime.fromtimestamp(us / 1_000_000, UTC).isoformat()


class MonitorStateStore:
    """Hysteresis state in SQLite (default) or PostgreSQL."""

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
                    return Firing(row["consecutive"], row["last_fire"])
                if end <= row["last_window_end_us"]:
                    return Firing(row["consecutive"], False)
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
