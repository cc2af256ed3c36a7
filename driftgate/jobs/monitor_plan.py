"""``driftgate monitors plan``: what each monitor can promise at the traffic it gets.

From the champion's reference profile and the rows per window (observed in the sample
store over the last day, or given), per monitor: expected false alarms per month (the
calibrated bound and the bare threshold's), the fewest rows per window the rule needs,
the smallest shift detected with 80% power within N checks, and warnings when the
schedule and traffic cannot support the rule (:mod:`monitors.planner`).
"""

from __future__ import annotations

import logging
from datetime import timedelta
from pathlib import Path

from driftgate import registry
from driftgate.config import ProjectConfig
from driftgate.core.errors import DriftgateError
from driftgate.core.yamlconfig import ConfigError
from driftgate.gates.config import GateConfig
from driftgate.monitors.planner import MonitorPlan, describe, plan_monitor

log = logging.getLogger(__name__)
TRAFFIC_LOOKBACK = timedelta(days=1)


def observed_rows_per_window(config: ProjectConfig, gates: GateConfig) -> dict[str, int]:
    """Monitor -> rows its window held on average over the last day of samples.

    Raises:
        ConfigError: The sample store has no sample in that day (pass the rows instead).
    """
    from driftgate.stores.factories import open_reader
    from driftgate.stores.samples import utc_now

    end = utc_now()
    reader = open_reader(config, None)
    try:
        # A count, not the rows: a day at 1,000 requests a second is 86M samples.
        if hasattr(reader, "window_stats"):
            rows = reader.window_stats(end - TRAFFIC_LOOKBACK, end).rows
        else:  # sample files: read as the drift check reads them
            rows = len(reader.read_window(end - TRAFFIC_LOOKBACK, end))
    finally:
        getattr(reader, "close", lambda: None)()
    if not rows:
        raise ConfigError(
            "no samples in the sample store over the last day to measure traffic: "
            "pass --rows-per-window N"
        )
    per_second = rows / TRAFFIC_LOOKBACK.total_seconds()
    return {m.name: max(round(per_second * m.length.total_seconds()), 1) for m in gates.monitors}


def plan_monitors(
    config: ProjectConfig,
    gates: GateConfig,
    *,
    rows_per_window: int | None = None,
    within: int = 12,
    profile=None,
    pooled: bool = True,
) -> list[MonitorPlan]:
    """One :class:`MonitorPlan` per monitor of the gate config, for the champion."""
    if profile is None:
        from driftgate.jobs.drift_check import load_champion_profile

        name = config.model.name
        version = registry.alias_version(config.tracking, name, registry.CHAMPION_ALIAS)
        if version is None:
            raise registry.RegistryError(
                f"model '{config.model.name}' has no champion: its reference profile is what "
                "the plan is computed from"
            )
        profile = load_champion_profile(config, version)
    refuse_inapplicable_monitors(config, gates, profile)
    if rows_per_window is not None:
        rows = {m.name: rows_per_window for m in gates.monitors}
    else:
        rows = observed_rows_per_window(config, gates)
    return [plan_monitor(m, profile, rows[m.name], within, pooled=pooled) for m in gates.monitors]


def refuse_inapplicable_monitors(config: ProjectConfig | None, gates: GateConfig, profile) -> None:
    """Every monitor checked against the champion as the drift check's start checks it
    (:func:`monitors.rules.check_monitors_against`): its features and their types (a
    ``chi2`` on a model without a categorical feature), the project's contract, and the
    champion's task (``performance_estimate:rmse`` or ``performance:rmse`` on a
    classifier, ``performance_estimate:accuracy`` on a regression): a configuration
    error naming the monitor, not a plan of a monitor that would only report ``error``.

    Raises:
        ConfigError: Naming each monitor and why it cannot run on this champion.
    """
    from driftgate.monitors.rules import check_monitors_against

    contract = None
    if config is not None and config.data.contract is not None:
        from driftgate.data_contracts import Contract

        contract = Contract.load(config.data.contract)
    outputs = getattr(profile, "outputs", None)
    check_monitors_against(
        gates.monitors,
        getattr(profile, "features", {}),
        contract,
        task=None if outputs is None else outputs.task,
    )


def deploy_warnings(config: ProjectConfig, gates: GateConfig) -> list[str]:
    """The planner's warnings for ``driftgate deploy`` (observed traffic), or one line
    saying why there is no plan yet (no tracking store, no champion, no traffic)."""
    uri = str(config.tracking.uri)
    if uri.startswith("sqlite:///") and not Path(uri.removeprefix("sqlite:///")).exists():
        return [f"monitors plan skipped: no tracking store yet at {uri} (train a champion first)"]
    try:
        plans = plan_monitors(config, gates, pooled=False)  # its warnings only
    except DriftgateError as exc:
        return [f"monitors plan skipped: {exc}"]
    return [w for p in plans for w in p.warnings]


__all__ = [
    "deploy_warnings",
    "describe",
    "observed_rows_per_window",
    "plan_monitors",
    "refuse_inapplicable_monitors",
]
