"""The two time syntaxes of a monitor: a window's duration (``30m``, ``1h``, ``7d``) and
a schedule's cron expression, each parsed in one place."""

from __future__ import annotations

import re
from datetime import UTC, datetime

import pandas as pd

# A window is read whole: the bound keeps one read's memory finite. A year, because the
# demo judges yearly windows of its historic data (``--window 365d``).
MAX_WINDOW = pd.Timedelta(days=366)
_DURATION = re.compile(r"^(\d{1,9})([smhd])$")
_UNITS = {"s": "s", "m": "min", "h": "h", "d": "D"}


def parse_duration(text: str, longest: pd.Timedelta | None = MAX_WINDOW) -> pd.Timedelta:
    """``30m``, ``1h``, ``7d`` -> Timedelta: the one syntax of a monitor's ``window`` and
    of ``driftgate drift-check --window``.

    Raises:
        ValueError: not ``<digits><s|m|h|d>``, zero (a window that never advances), or
            longer than ``longest`` (default :data:`MAX_WINDOW`; None: no bound, for a
            span read in chunks, such as a retrain's ``retrain.data.recent``).
    """
    match = _DURATION.match(str(text).strip())
    if match is None:
        raise ValueError(
            f"window '{text}' is not a duration: digits and one unit of s, m, h, d (e.g. 30m, 1h)"
        )
    try:
        length = pd.Timedelta(int(match[1]), unit=_UNITS[match[2]])
    except (OverflowError, ValueError):  # beyond what a timestamp holds (about 292 years)
        raise ValueError(f"window '{text}' is longer than any time can be") from None
    if length <= pd.Timedelta(0):
        raise ValueError(f"window '{text}' is empty: it must be longer than 0")
    if longest is not None and length > longest:
        raise ValueError(f"window '{text}' is longer than the maximum of {longest.days}d")
    return length


def validate_cron(schedule: str) -> str:
    """Refuse what Prefect's scheduler would refuse, with the parser it uses (croniter),
    plus the five-field form: ``driftgate deploy`` hands this string to Prefect."""
    from croniter import CroniterBadDateError, croniter

    fields = schedule.split()
    if len(fields) != 5:
        raise ValueError(f"cron schedule needs 5 fields, got {len(fields)}: '{schedule}'")
    # Prefect refuses croniter's random and hashed expressions (R, H) too.
    if not croniter.is_valid(schedule) or any(f.casefold() in ("r", "h") for f in fields):
        raise ValueError(f"cron schedule '{schedule}' is not a valid cron expression")
    # Each field valid, no date matching them all (30 February, 31 April): croniter
    # accepts the expression, Prefect would schedule a deployment that never runs, and
    # counting its fires (the false-alarm budget of every drift check, `monitors plan`,
    # `deploy`'s warnings) raised CroniterBadDateError. The rarest real date, 29
    # February, is at most 8 years ahead, well inside croniter's search.
    try:
        croniter(schedule, datetime(2026, 1, 1, tzinfo=UTC)).get_next(datetime)
    except CroniterBadDateError:
        raise ValueError(
            f"cron schedule '{schedule}' never fires: no date has that day and month"
        ) from None
    return schedule
