"""Moments as the stores keep them: integer microseconds since the epoch, UTC.

Shared by the review, monitor-state, retrain and control stores (they once borrowed the review
store's private helpers, which tied the monitor-state store and the review store into
an import cycle)."""

from __future__ import annotations

from datetime import UTC, datetime

from driftgate.stores.samples import to_utc


def to_us(moment: datetime | str | None) -> int | None:
    """``moment`` (aware, naive = UTC, or ISO text) in microseconds; None stays None."""
    return None if moment is None else to_utc(moment).value // 1000


def time_of_us(us: int | None) -> datetime | None:
    """Stored microseconds back to an aware UTC datetime; None stays None."""
    return None if us is None else datetime.fromtimestamp(us / 1_000_000, UTC)


def iso_of_us(us: int | None) -> str | None:
    """Stored microseconds back to an ISO 8601 text in UTC; None stays None."""
    return None if us is None else time_of_us(us).isoformat()


def now_us() -> int:
    return to_us(datetime.now(UTC))
