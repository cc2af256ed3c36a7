"""Monitor rules: the production rules of ``gates.yaml`` and their evaluation on a window.

One place for what "a monitor" means to the loop (the statistics engine beside it,
:mod:`monitors.drift`, only computes statistics):

- :class:`Monitor`, the rule as configured (``metric``, ``features``, ``threshold``,
  ``schedule``, ``window``, ``action``, ``consecutive_breaches``), its action validated
  against the actions registry when the gate config loads;
- :func:`evaluate_monitor`, a rule on one window's drift report or contract result,
  and :func:`apply_hysteresis`, whether it fires.

The drift check itself runs with each monitor's threshold (``check_drift(...,
thresholds={metric: threshold})``), so "breached" here means exactly what the drift
engine decided, with its effect-size floor and corrections, and never a second rule.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Literal

import pandas as pd
from pydantic import Field, field_validator

from driftgate.core.yamlconfig import StrictModel

CONTRACT_PREFIX = "contract:"


def parse_duration(text: str) -> pd.Timedelta:
    """``30m``, ``1h``, ``7d`` -> Timedelta (the monitors' ``window`` syntax)."""
    unit = {"s": "s", "m": "min", "h": "h", "d": "D"}[text[-1]]
    return pd.Timedelta(int(text[:-1]), unit=unit)


class Monitor(StrictModel):
    """A production rule: when ``metric`` on a window exceeds ``threshold``, take ``action``.

    ``metric`` is a registered drift test (``kl``, ``ks``, ``missing_share``, ...) or a
    contract rule (``contract:<rule>``). ``action`` is a registered monitor action
    (:mod:`monitors.actions`). ``consecutive_breaches`` adds hysteresis: the action
    fires only after that many breaching windows in a row.
    """

    name: str = Field(min_length=1, pattern=r"^[A-Za-z0-9_.\-]+$")
    metric: str = Field(min_length=1)
    features: list[str] | Literal["all"] = "all"
    threshold: float
    schedule: str = Field(description="cron, five fields")
    action: str = Field(min_length=1, description="a registered monitor action")
    consecutive_breaches: int = Field(1, ge=1)
    window: str = Field("1h", pattern=r"^\d+[smhd]$", description="window length, e.g. 30m, 1h")

    @field_validator("action")
    @classmethod
    def _known_action(cls, action: str) -> str:
        from driftgate.monitors.actions import action_names

        if action not in action_names():
            raise ValueError(f"unknown action '{action}' (known: {', '.join(action_names())})")
        return action

    @field_validator("schedule")
    @classmethod
    def _cron_has_five_fields(cls, schedule: str) -> str:
        fields = schedule.split()
        if len(fields) != 5:
            raise ValueError(f"cron schedule needs 5 fields, got {len(fields)}: '{schedule}'")
        return schedule

    @property
    def length(self) -> pd.Timedelta:
        return parse_duration(self.window)


@dataclass(frozen=True)
class MonitorResult:
    """One monitor on one window.

    ``status`` is ``ok`` (evaluated), ``no_data`` (empty window or all values missing:
    reported, never a silent pass) or ``error`` (the metric cannot be evaluated).
    ``observed`` is the worst value among the monitor's features (largest distance,
    smallest p-value, most failed contract rules).
    """

    monitor: str
    metric: str
    action: str
    threshold: float
    breached: bool
    observed: float | None
    status: str = "ok"
    breached_features: list[str] = field(default_factory=list)
    reason: str = ""

    def to_dict(self) -> dict:
        data = asdict(self)
        if self.observed is not None and not math.isfinite(self.observed):
            data["observed"] = str(self.observed)
        return data


def drift_tests_of(monitors: list[Monitor]) -> dict[str, float]:
    """Drift test name -> threshold to pass to ``check_drift`` for these monitors.

    Two monitors on the same test with different thresholds cannot share one drift
    computation's decision; the caller runs one check per distinct threshold (see
    :func:`group_by_threshold`).
    """
    return {m.metric: m.threshold for m in monitors if not m.metric.startswith(CONTRACT_PREFIX)}


def group_by_threshold(monitors: list[Monitor]) -> list[list[Monitor]]:
    """Split drift monitors into groups in which every test has a single threshold."""
    groups: list[list[Monitor]] = []
    for monitor in monitors:
        if monitor.metric.startswith(CONTRACT_PREFIX):
            continue
        for group in groups:
            if all(m.metric != monitor.metric or m.threshold == monitor.threshold for m in group):
                group.append(monitor)
                break
        else:
            groups.append([monitor])
    return groups


def evaluate_monitor(monitor: Monitor, drift_report=None, contract_result=None) -> MonitorResult:
    """Evaluate ``monitor`` on a window's drift report or contract result."""
    base = {
        "monitor": monitor.name,
        "metric": monitor.metric,
        "action": monitor.action,
        "threshold": monitor.threshold,
    }
    if monitor.metric.startswith(CONTRACT_PREFIX):
        return _contract_monitor(monitor, contract_result, base)
    if drift_report is None:
        return MonitorResult(
            **base,
            breached=False,
            observed=None,
            status="error",
            reason="no drift report for this window",
        )
    wanted = None if monitor.features == "all" else set(monitor.features)
    results = [
        r
        for r in drift_report.results
        if r.test == monitor.metric and (wanted is None or r.feature in wanted)
    ]
    if wanted is not None:
        unknown = wanted - {r.feature for r in results}
        if unknown:
            return MonitorResult(
                **base,
                breached=False,
                observed=None,
                status="error",
                reason=f"features without a {monitor.metric} result: {', '.join(sorted(unknown))}",
            )
    if not results:
        return MonitorResult(
            **base,
            breached=False,
            observed=None,
            status="error",
            reason=f"the drift report has no '{monitor.metric}' results",
        )
    evaluated = [r for r in results if r.status == "ok"]
    if not evaluated:
        reasons = sorted({r.reason for r in results if r.reason})
        return MonitorResult(
            **base,
            breached=False,
            observed=None,
            status="no_data",
            reason="; ".join(reasons) or "no data in the window",
        )
    breached = sorted(r.feature for r in evaluated if r.drifted)
    if evaluated[0].direction == "p_value":
        observed = min(
            (r.adjusted_p_value if r.adjusted_p_value is not None else r.p_value) for r in evaluated
        )
    else:
        observed = max(r.value for r in evaluated)
    no_data = [r.feature for r in results if r.status != "ok"]
    reason = f"no data for {', '.join(no_data)}" if no_data else ""
    return MonitorResult(
        **base,
        breached=bool(breached),
        observed=float(observed),
        breached_features=breached,
        reason=reason,
    )


def _contract_monitor(monitor: Monitor, contract_result, base: dict) -> MonitorResult:
    kind = monitor.metric.removeprefix(CONTRACT_PREFIX)
    if contract_result is None:
        return MonitorResult(
            **base,
            breached=False,
            observed=None,
            status="error",
            reason="no contract result for this window",
        )
    failed = [
        r
        for r in contract_result.failures
        if (kind in ("any", r.kind)) and (monitor.features == "all" or r.column in monitor.features)
    ]
    columns = sorted({r.column for r in failed if r.column})
    return MonitorResult(
        **base,
        breached=len(failed) > monitor.threshold,
        observed=float(len(failed)),
        breached_features=columns,
        reason="; ".join(f"{r.rule}: {r.message}" for r in failed),
    )


@dataclass(frozen=True)
class Firing:
    """Hysteresis: ``consecutive`` breaching windows so far; ``fire`` when enough."""

    consecutive: int
    fire: bool


def apply_hysteresis(monitor: Monitor, result: MonitorResult, consecutive_before: int) -> Firing:
    """Count consecutive breaches; a window without data neither counts nor resets."""
    if result.status != "ok":
        return Firing(consecutive_before, False)
    consecutive = consecutive_before + 1 if result.breached else 0
    return Firing(consecutive, result.breached and consecutive >= monitor.consecutive_breaches)
