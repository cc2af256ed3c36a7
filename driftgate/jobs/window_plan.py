"""Which windows a drift-check run judges: the window ending now for each monitor, the
windows missed since the last run (catch-up), and the windows judged before that hold
more labels now (performance monitors are judged again as late labels arrive).

Plain functions over the gate config, the registry's champion and the monitor-state
and label stores; :func:`driftgate.jobs.drift_check.judge_recent` and the drift-check
flow judge what :func:`plan_recent` returns.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

import pandas as pd

from driftgate import registry
from driftgate.config import ProjectConfig
from driftgate.core.yamlconfig import ConfigError
from driftgate.gates.config import GateConfig
from driftgate.monitors.durations import parse_duration
from driftgate.monitors.kinds import kind_of
from driftgate.monitors.rules import Monitor
from driftgate.stores.factories import label_store, monitor_state_store
from driftgate.stores.samples import storable_time, time_before, to_utc

log = logging.getLogger(__name__)

# (start, end, the monitors judged on that window)
PlannedWindow = tuple[pd.Timestamp, pd.Timestamp, list[Monitor]]


def window_override(window: str | None) -> pd.Timedelta | None:
    """``--window`` as a length, by the monitors' own parser (ConfigError if invalid)."""
    if window is None:
        return None
    try:
        return parse_duration(window)
    except ValueError as exc:
        raise ConfigError(f"--window: {exc}") from None


def plan_windows(
    gates: GateConfig,
    *,
    end=None,
    window: str | None = None,
    names: list[str] | None = None,
    last_judged: Mapping[str, pd.Timestamp] | None = None,
    max_catch_up: int = 0,
) -> list[PlannedWindow]:
    """(start, end, monitors) per window, in time order per monitor.

    Each monitor gets the window ending at ``end`` (default now); monitors sharing a
    window length (and a last judged window) share windows. ``window`` overrides every
    monitor's length; ``names`` selects monitors (unknown: ConfigError).

    Catch-up: when ``last_judged`` (monitor -> end of its last judged window) shows
    whole windows missed since — a run that failed, a worker that was down — those
    windows come first, oldest first, at most ``max_catch_up`` of them (the newest).
    """
    from driftgate.stores.samples import utc_now

    end = storable_time(end or utc_now())  # also a flow run's `end`: no CLI checked it
    monitors = gates.monitors
    if names:
        unknown = sorted(set(names) - {m.name for m in monitors})
        if unknown:
            known = ", ".join(m.name for m in monitors)
            raise ConfigError(f"unknown monitor(s) {', '.join(unknown)}; known: {known}")
        monitors = [m for m in monitors if m.name in names]
    override = window_override(window)
    groups: dict[tuple[pd.Timedelta, pd.Timestamp | None], list[Monitor]] = {}
    for monitor in monitors:
        last = (last_judged or {}).get(monitor.name)
        key = (override or monitor.length, to_utc(last) if last else None)
        groups.setdefault(key, []).append(monitor)
    planned = []
    for (length, last), group in groups.items():
        current_start = time_before(end, length)
        missed = []
        if last is not None and max_catch_up > 0 and last + length <= current_start:
            # Counted, not listed: a long outage with a short window must not build a
            # list of every missed window only to keep the newest few.
            count = (current_start - last) // length
            if count > max_catch_up:
                log.warning(
                    "%s: %d windows missed since %s; judging the last %d",
                    ", ".join(m.name for m in group),
                    count,
                    last,
                    max_catch_up,
                )
            first = last + (count - min(count, max_catch_up)) * length
            missed = [
                (first + i * length, first + (i + 1) * length, group)
                for i in range(min(count, max_catch_up))
            ]
        planned += [*missed, (current_start, end, group)]
    return planned


def last_judged_ends(config: ProjectConfig, gates: GateConfig) -> dict[str, pd.Timestamp]:
    """Monitor -> end of the last window judged for the current champion (for catch-up)."""
    version = registry.alias_version(config.tracking, config.model.name, registry.CHAMPION_ALIAS)
    if version is None:
        return {}
    state = monitor_state_store(config)
    try:
        ends = {
            m.name: state.last_window_end(config.model.name, version, m.name)
            for m in gates.monitors
        }
    finally:
        state.close()
    return {name: pd.Timestamp(end) for name, end in ends.items() if end is not None}


def plan_recent(
    config: ProjectConfig,
    gates: GateConfig,
    *,
    end=None,
    window: str | None = None,
    monitor_names: list[str] | None = None,
) -> list[PlannedWindow]:
    """The windows a drift-check run judges: the current one for each monitor, after any
    missed since the last run (``monitoring.max_catch_up_windows``)."""
    window_override(window)  # refused before the registry and the stores are asked
    catch_up = config.monitoring.max_catch_up_windows
    planned = plan_windows(
        gates,
        end=end,
        window=window,
        names=monitor_names,
        last_judged=last_judged_ends(config, gates) if catch_up else None,
        max_catch_up=catch_up,
    )
    again = plan_rejudgements(config, gates, end=end, monitor_names=monitor_names)
    fresh = {(a, b, m.name) for a, b, group in planned for m in group}
    again = [
        (a, b, kept)
        for a, b, group in again
        if (kept := [m for m in group if (a, b, m.name) not in fresh])
    ]
    return again + planned


def plan_rejudgements(
    config: ProjectConfig,
    gates: GateConfig,
    *,
    end=None,
    monitor_names: list[str] | None = None,
    now=None,
) -> list[PlannedWindow]:
    """Windows to judge again for the performance monitors: windows judged before that
    hold more labels for the champion now than when they were last judged, looked for
    among the windows of the labels that *arrived* within ``serving.label_horizon`` of
    ``now`` (the wall clock; later labels are refused, counted from their records'
    receipt). Oldest first; empty when no performance monitor is selected.

    The horizon is counted on the wall clock, not in event time from ``end``: a replay
    sends records of a year ago today and their labels after them, and its windows,
    a year of event time before any check's end, were never judged again (issue 30)."""
    from driftgate.stores._sql import is_sql_url
    from driftgate.stores.samples import utc_now

    monitors = [
        m
        for m in gates.monitors
        if kind_of(m.metric).rejudged_as_labels_arrive
        and (not monitor_names or m.name in monitor_names)
    ]
    url = config.serving.sample_store(config.home_dir)
    if not monitors or not is_sql_url(url):
        return []
    name = config.model.name
    version = registry.alias_version(config.tracking, name, registry.CHAMPION_ALIAS)
    if version is None:
        return []
    storable_time(end or utc_now())  # also a flow run's `end`: no CLI checked it
    horizon = config.serving.horizon
    now = to_utc(now or utc_now())
    labels = label_store(config)
    try:
        span = labels.arrived_span(
            None if horizon is None else time_before(now, horizon), model_version=version
        )
        if span is None:  # no label arrived within the horizon: nothing can have changed
            return []
        first, last = (pd.Timestamp(us, unit="us", tz="UTC") for us in span)
        state = monitor_state_store(config)
        windows: dict[tuple[pd.Timestamp, pd.Timestamp], list[Monitor]] = {}
        try:
            for monitor in monitors:
                for start, stop, counted in state.rejudgeable(name, version, monitor.name, first):
                    start, stop = to_utc(start), to_utc(stop)
                    if start > last:
                        continue
                    if labels.count(start, stop, model_version=version) > counted:
                        windows.setdefault((start, stop), []).append(monitor)
        finally:
            state.close()
    finally:
        labels.close()
    return [(start, stop, group) for (start, stop), group in sorted(windows.items())]
