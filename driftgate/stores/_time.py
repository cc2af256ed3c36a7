"""Moments as the stores keep them: integer microseconds since the epoch, UTC.

Shared by the sample, label, review, monitor-state, retrain and control stores (they
once borrowed each other's private helpers, which tied the monitor-state store and the
review store into an import cycle). The times the sample store holds (1678..2262) and
the conversions to them are here too, so no store imports the sample store for a time;
``driftgate.stores.samples`` still exports them."""

from __future__ import annotations

from datetime import UTC, datetime

import pandas as pd


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


# Windows come back with pandas datetime64[ns] columns, which span 1677-09-21 to
# 2262-04-11: the store keeps event times inside this (half-open) range.
EARLIEST_TIMESTAMP = datetime(1678, 1, 1, tzinfo=UTC)
LATEST_TIMESTAMP = datetime(2262, 1, 1, tzinfo=UTC)


def to_utc(moment: object) -> pd.Timestamp:
    """A datetime, pandas Timestamp or ISO string as a UTC Timestamp (naive = UTC)."""
    stamp = pd.Timestamp(moment)
    if stamp is pd.NaT:
        raise ValueError(f"not a time: {moment!r}")
    return stamp.tz_localize("UTC") if stamp.tzinfo is None else stamp.tz_convert("UTC")


def _to_us(moment: object) -> int:
    return to_utc(moment).value // 1000


def storable_time(moment: object) -> pd.Timestamp:
    """``moment`` as a UTC Timestamp, refused (ValueError) outside the times the store
    holds. Also the bound of every time a user gives a job (a window's end, retention's
    "now"): pandas parses ``9999-12-31`` at second resolution, but the first nanosecond
    arithmetic on it (a window's start, a cutoff) overflows."""
    stamp = to_utc(moment)
    if not EARLIEST_TIMESTAMP <= stamp < LATEST_TIMESTAMP:
        raise ValueError(
            f"time {moment!r} outside [{EARLIEST_TIMESTAMP:%Y-%m-%d}, "
            f"{LATEST_TIMESTAMP:%Y-%m-%d}), the times the sample store holds"
        )
    return stamp.as_unit("ns")


def time_before(moment: pd.Timestamp, length: pd.Timedelta) -> pd.Timestamp:
    """``moment - length``, but never before :data:`EARLIEST_TIMESTAMP`: the store holds
    nothing earlier, and pandas holds little earlier (a 366-day window ending in
    February 1678 would start before 1677-09-21, an OutOfBoundsDatetime)."""
    earliest = pd.Timestamp(EARLIEST_TIMESTAMP)
    # earliest + length, not moment - earliest: that difference may exceed a Timedelta.
    return moment - length if moment >= earliest + length else earliest


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _storable_us(moment: datetime) -> int:
    """``storable_time(moment)`` in microseconds. An aware UTC datetime inside the
    store's range (the service's clock: two per sample, one per requests-log row) is
    counted by integer datetime arithmetic, the same microseconds without a pandas
    Timestamp (issue 32: that was a third of the group commit's CPU); anything else
    goes through :func:`storable_time`, which refuses what the store cannot hold."""
    if (
        type(moment) is datetime
        and moment.tzinfo is UTC
        and EARLIEST_TIMESTAMP <= moment < LATEST_TIMESTAMP
    ):
        delta = moment - _EPOCH
        return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds
    return storable_time(moment).value // 1000


def utc_now() -> datetime:
    return datetime.now(UTC)
