"""False-alarm budgets: a monitor's error rate over a horizon, spent across its checks.

A monitor states ``false_alarms: {rate: 0.05, per: 30d}``: with no drift, the
probability that it *fires* at least once in any 30 days is at most 5%. Its schedule
gives the checks in that horizon (``C``, e.g. 720 for hourly), its features the tests
per check (``m``), its ``consecutive_breaches`` the run length ``k`` that fires.

Method: uniform alpha spending over the checks of the horizon, Bonferroni over the
features of one check, and the hysteresis run as part of the calculation:

* a check breaches with probability at most ``q = m * level`` (Bonferroni: valid
  whatever the dependence between features);
* with ``k = 1`` a fire is a breach, so ``P(any fire in C checks) <= C q`` (a union
  bound: valid whatever the dependence between checks) and ``q = rate / C``;
* with ``k > 1`` a fire needs ``k`` breaching windows in a row. Windows of one monitor
  do not overlap, so their no-drift outcomes are independent given the reference and
  ``P(some run of k) <= (C - k + 1) q^k``, hence ``q = (rate / (C - k + 1))^(1/k)``:
  ``consecutive_breaches: 2`` on an hourly monitor allows ``q = 0.0084`` per check
  instead of ``7e-5``, which is how hysteresis buys power on small windows.

Why not a sequential test (an e-process, a CUSUM) or online FDR: those need state per
feature carried from window to window and decide on evidence accumulated across
windows, which a reviewer cannot read off one window's report; alpha spending keeps
each window's decision self-contained (one p-value, one level, one report) and its
guarantee needs no independence for ``k = 1``. The price is power on small windows,
which :func:`driftgate.jobs.monitor_plan.plan_monitors` makes visible before deploying.
Online FDR (LORD, SAFFRON) controls the share of false alarms among alarms, not the
chance of a false pause, which is what an operator budgets. Power across windows comes
from pooled tests instead (:mod:`monitors.evidence`, :func:`per_scale_check_budgets`):
each pool is one more self-contained test, its share of the budget spent the same way.
"""

from __future__ import annotations

import functools
from datetime import UTC, datetime, timedelta

from pydantic import Field, field_validator

from driftgate.core.yamlconfig import StrictModel

DEFAULT_RATE = 0.05
DEFAULT_HORIZON = "30d"
# A fixed, ordinary Monday: the number of cron fires in a horizon must not depend on
# the day the config is read.
_EPOCH = datetime(2026, 1, 5, tzinfo=UTC)
_MAX_COUNTED = 1_000_000


class FalseAlarms(StrictModel):
    """``rate``: largest probability of at least one false fire ``per`` horizon."""

    rate: float = Field(DEFAULT_RATE, gt=0, lt=1)
    per: str = Field(DEFAULT_HORIZON, description="horizon, a duration such as 30d or 7d")

    @field_validator("per")
    @classmethod
    def _per_is_a_duration(cls, per: str) -> str:
        from driftgate.monitors.durations import parse_duration

        parse_duration(per)
        return per

    @property
    def horizon(self) -> timedelta:
        from driftgate.monitors.durations import parse_duration

        return parse_duration(self.per).to_pytimedelta()


@functools.lru_cache(maxsize=256)
def checks_in(schedule: str, horizon: timedelta) -> int:
    """How many times a five-field cron ``schedule`` fires in ``horizon`` (at least 1).

    Cached, and counted without iterating for schedules that fire at a fixed step: a
    drift check asks for every monitor's level several times, and croniter takes about
    0.2 ms a fire (an hourly schedule over 30 days was 0.15 s of a fresh 30-row check
    each time, issue 32)."""
    fixed = _fixed_step(schedule.split())
    if fixed is not None:
        offset, step = fixed
        span = horizon // timedelta(microseconds=1) - offset
        # Capped as the iterated count is, so both ways give the same answer.
        return min(_MAX_COUNTED, max(1, -(-span // step) if span > 0 else 0))
    return _iterated_checks_in(schedule, horizon)


def _iterated_checks_in(schedule: str, horizon: timedelta) -> int:
    """:func:`checks_in` by iterating the schedule's fires with croniter."""
    from croniter import croniter

    iterator = croniter(schedule, _EPOCH - timedelta(seconds=1))
    end = _EPOCH + horizon
    count = 0
    while count < _MAX_COUNTED:
        if iterator.get_next(datetime) >= end:
            break
        count += 1
    return max(count, 1)


def _fixed_step(fields: list[str]) -> tuple[int, int] | None:
    """(first fire after _EPOCH, step), in microseconds, of a schedule whose fires are
    evenly spaced from _EPOCH (a Monday 00:00): every N minutes with N dividing 60,
    minute M of every hour or of every H hours (H dividing 24), or H:M daily; else None
    (then the fires are counted one by one)."""
    if len(fields) != 5 or fields[2:] != ["*", "*", "*"]:
        return None
    minute, hour = fields[0], fields[1]
    minute_us = 60 * 10**6

    def every(field: str, period: int) -> int | None:  # "*" or "*/N", N dividing period
        if field == "*":
            return 1
        # ASCII digits only: croniter refuses other digits, and so must this shortcut.
        if field.startswith("*/") and field[2:].isascii() and field[2:].isdigit():
            n = int(field[2:])
            return n if 0 < n < period and period % n == 0 else None
        return None

    def at(field: str, period: int) -> int | None:  # a single value in 0..period-1
        return int(field) if field.isascii() and field.isdigit() and int(field) < period else None

    if hour == "*":
        if (n := every(minute, 60)) is not None:
            return 0, n * minute_us
        if (m := at(minute, 60)) is not None:
            return m * minute_us, 60 * minute_us
        return None
    m = at(minute, 60)
    if m is None:
        return None
    if (n := every(hour, 24)) is not None:
        return m * minute_us, n * 60 * minute_us
    if (h := at(hour, 24)) is not None:
        return (h * 60 + m) * minute_us, 24 * 60 * minute_us
    return None


def per_check_budget(rate: float, checks: int, consecutive: int = 1) -> float:
    """``q``: the probability a no-drift check may breach (see the module docstring)."""
    runs = max(checks - consecutive + 1, 1)
    return min((rate / runs) ** (1 / consecutive), 1.0)


def per_test_level(rate: float, checks: int, features: int, consecutive: int = 1) -> float:
    """The level of each feature's test in one check: ``q / m``."""
    return per_check_budget(rate, checks, consecutive) / max(features, 1)


def expected_false_fires(level: float, checks: int, features: int, consecutive: int = 1) -> float:
    """Upper bound of the expected number of false fires in ``checks`` no-drift checks."""
    q = min(level * max(features, 1), 1.0)
    return max(checks - consecutive + 1, 0) * q**consecutive


def per_scale_check_budgets(
    rate: float, checks: int, consecutive: int, scales: tuple[int, ...]
) -> dict[int, float]:
    """``q`` per evidence scale (:mod:`monitors.evidence`): the budget ``rate`` split
    equally over the scales (Bonferroni), each scale's share spent over the checks.

    Scale 1 (the window alone) keeps today's rule on its share, hysteresis included.
    A pooled scale ``k > 1`` tests the last ``k`` windows at every check, so its tests
    overlap and are dependent: its share is spent by the union bound alone,
    ``q_k = rate / S / C``, whatever ``consecutive`` (a run of ``k`` breaches only
    makes a fire rarer). A fire then needs a run of scale-1 breaches or at least one
    pooled breach, so ``P(fire) <= rate / S + (S - 1) rate / S = rate``.
    """
    share = rate / len(scales)
    return {
        scale: per_check_budget(share, checks, consecutive if scale == 1 else 1) for scale in scales
    }
