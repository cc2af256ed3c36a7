"""Monitor rules: the production rules of ``gates.yaml`` and their evaluation on a window.

One place for what "a monitor" means to the loop (the statistics engine beside it,
:mod:`monitors.drift`, only computes statistics):

- :class:`Monitor`, the rule as configured (``metric``, ``features``, ``threshold``,
  ``schedule``, ``window``, ``action``, ``consecutive_breaches``), validated when the gate
  config loads against the statistics registry, the contract rule kinds, the actions
  registry, the scheduler's cron parser and :func:`parse_duration`;
- :func:`check_monitors_against`, the checks that need the project too (features of
  the model, rules of its contract), run where both are known: the drift check's start
  and ``driftgate deploy``'s plan;
- :func:`evaluate_monitor`, a rule on one window's drift report or contract result,
  and :func:`apply_hysteresis`, whether it fires.

The drift check itself runs with each monitor's threshold (``check_drift(...,
thresholds={metric: threshold})``), so "breached" here means exactly what the drift
engine decided, with its effect-size floor and corrections, and never a second rule.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import timedelta
from typing import Literal

import pandas as pd
from pydantic import Field, ValidationInfo, field_validator, model_validator

from driftgate.core.yamlconfig import ConfigError, StrictModel
from driftgate.monitors.budget import FalseAlarms, checks_in, per_test_level
from driftgate.monitors.durations import parse_duration, validate_cron
from driftgate.monitors.estimates import known_metrics
from driftgate.monitors.performance import PERFORMANCE_METRICS, PERFORMANCE_PREFIX
from driftgate.monitors.results import (
    CONTRACT_PREFIX,
    PERFORMANCE_ESTIMATE,
    PREDICTION_DRIFT,
    MonitorResult,
    split_metric,
)

# Every kind of rule a contract makes (data_contracts.model.Contract.rules), and ``any``
# for all of them; tests/monitors/test_rules.py fails if the contract grows a new kind.
CONTRACT_RULE_KINDS = (
    "any",
    "row_count",
    "extra_columns",
    "exists",
    "dtype",
    "nulls",
    "range",
    "finite",
    "categories",
    "unique",
)


def is_output_metric(metric: str) -> bool:
    """True for the metrics judged on the model's outputs (:mod:`monitors.outputs`)."""
    name, argument = split_metric(metric)
    return (name == PREDICTION_DRIFT and argument is None) or name == PERFORMANCE_ESTIMATE


def is_performance(metric: str) -> bool:
    """Whether ``metric`` is a realized-performance metric (``performance:<metric>``)."""
    return split_metric(metric)[0] == PERFORMANCE_PREFIX.rstrip(":")


def is_stattest_metric(metric: str) -> bool:
    """True for a drift statistic on the features (``ks``, ``kl``, ...): a metric with no
    ``name:argument`` form, not judged on the outputs nor on the traffic counts."""
    return (
        split_metric(metric)[1] is None and not is_output_metric(metric) and not _is_traffic(metric)
    )


RETRAIN_ACTION = "retrain"


class RetrainSettings(StrictModel):
    """``retrain:`` on a monitor whose ``action`` is ``retrain`` (all optional)."""

    lease: str = Field(
        "6h",
        description="how long a retrain may stay in flight before it is taken as dead and "
        "the model's slot is freed (longer than your slowest train + gate + approval)",
    )
    approval: Literal["none", "required"] = Field(
        "none",
        description="required: a candidate that passes the gate waits for a person before "
        "it is promoted (a form in the Prefect UI; in process: driftgate promote)",
    )
    approval_timeout: str = Field(
        "24h", description="how long the candidate waits for the person (approval: required)"
    )
    cooldown: str | None = Field(
        None,
        description="after a retrain of the model ends, how long before a breach may start "
        "another (a drift that persists breaches every window; each retrain costs a "
        "training run). None: any breach once the previous retrain ended",
    )

    @field_validator("lease", "approval_timeout", "cooldown")
    @classmethod
    def _is_a_duration(cls, value: str | None, info) -> str | None:
        if value is None:
            return value
        try:
            parse_duration(value)
        except ValueError as exc:
            raise ValueError(str(exc).replace("window", info.field_name, 1)) from None
        return value

    @model_validator(mode="after")
    def _approval_fits_the_lease(self) -> RetrainSettings:
        if self.approval == "required" and self.approval_wait >= self.lease_length:
            raise ValueError(
                f"approval_timeout {self.approval_timeout} must be shorter than lease "
                f"{self.lease}: the retrain holds the model's slot while it waits"
            )
        return self

    @property
    def lease_length(self) -> pd.Timedelta:
        return parse_duration(self.lease)

    @property
    def cooldown_length(self) -> timedelta | None:
        return None if self.cooldown is None else parse_duration(self.cooldown).to_pytimedelta()

    @property
    def approval_wait(self) -> pd.Timedelta:
        return parse_duration(self.approval_timeout)

    @property
    def approval_seconds(self) -> int | None:
        """Seconds a candidate waits for a person, or None without approval."""
        if self.approval != "required":
            return None
        return int(self.approval_wait.total_seconds())


class Monitor(StrictModel):
    """A production rule: when ``metric`` on a window exceeds ``threshold``, take ``action``.

    ``metric`` is a registered drift statistic (``kl``, ``ks``, ``missing_share``, ...),
    a contract rule kind (``contract:<kind>``, ``contract:any``), a metric on the
    model's outputs (``prediction_drift``, ``performance_estimate:<accuracy|roc_auc>``,
    :mod:`monitors.outputs`), or the realized performance on the window's labelled
    records (``performance:<metric>``, a metric of the task: :mod:`monitors.performance`;
    ``threshold`` is the largest tolerated drop from the champion's test metric). ``action`` is a
    registered monitor action (:mod:`monitors.actions`). ``consecutive_breaches`` adds
    hysteresis: the action fires only after that many breaching windows in a row.
    """

    name: str = Field(min_length=1, pattern=r"^[A-Za-z0-9_.\-]+$")
    metric: str = Field(min_length=1)
    features: list[str] | Literal["all"] = "all"
    threshold: float
    schedule: str = Field(description="cron, five fields")
    action: str = Field(min_length=1, description="a registered monitor action")
    consecutive_breaches: int = Field(1, ge=1)
    window: str = Field("1h", description="window length, e.g. 30m, 1h (at most 366d)")
    false_alarms: FalseAlarms = Field(
        default_factory=FalseAlarms,
        description="largest chance of a false fire per horizon, spent across the checks "
        "of the schedule and the features (monitors.budget)",
    )
    effect_size_floor: float | None = Field(
        None,
        ge=0,
        description="p-value tests (ks, chi2): the smallest effect size that may breach "
        "(default: the test's own, ks D >= 0.05, chi2 V >= 0.1); distance tests: the "
        "threshold is the floor",
    )
    population: Literal["accepted", "all"] = Field(
        "accepted",
        description="drift statistics: the accepted samples only, or every received "
        "record, the refused ones included (issue 16), so a shift the contract refuses "
        "shows as drift too",
    )
    calibrated: bool = Field(
        True,
        description="breach only when the value is over the threshold AND significant at "
        "the window's size (false: the bare threshold, as before issue 15)",
    )
    min_labels: int = Field(
        30,
        ge=2,
        description="performance monitors: fewer labelled records in a window are "
        "insufficient_data",
    )
    retrain: RetrainSettings | None = Field(
        None, description="settings of the retrain action (action: retrain only)"
    )

    @field_validator("metric")
    @classmethod
    def _known_metric(cls, metric: str) -> str:
        if metric.startswith(CONTRACT_PREFIX):
            kind = metric.removeprefix(CONTRACT_PREFIX)
            if kind not in CONTRACT_RULE_KINDS:
                raise ValueError(
                    f"unknown contract rule kind '{kind}' (known: {', '.join(CONTRACT_RULE_KINDS)})"
                )
            return metric
        name, argument = split_metric(metric)
        if name == PREDICTION_DRIFT and argument is None:
            return metric
        if is_performance(metric):
            if argument not in PERFORMANCE_METRICS:
                raise ValueError(
                    f"unknown performance metric '{argument}' "
                    f"(known: {', '.join(PERFORMANCE_METRICS)})"
                )
            return metric
        if name == PERFORMANCE_ESTIMATE:
            if argument not in known_metrics():
                raise ValueError(
                    f"unknown estimated metric '{argument}' in '{metric}' "
                    f"(known: {', '.join(known_metrics())})"
                )
            return metric
        from driftgate.monitors.traffic import REJECTED_SHARE, TRAFFIC_KINDS, is_traffic_metric

        if is_traffic_metric(metric):
            kind = metric.partition(":")[2]
            if kind and kind not in TRAFFIC_KINDS:
                raise ValueError(
                    f"unknown rule kind '{kind}' for {REJECTED_SHARE} (known: "
                    f"{', '.join(TRAFFIC_KINDS)})"
                )
            return metric
        from driftgate.monitors.stattests import STATTESTS

        if metric not in STATTESTS:
            raise ValueError(
                f"unknown statistic '{metric}' (known: {', '.join(sorted(STATTESTS))}, "
                f"or {CONTRACT_PREFIX}<rule kind>, {PREDICTION_DRIFT}, "
                f"{PERFORMANCE_ESTIMATE}:<metric>, performance:<metric>, or a traffic "
                "metric: rejected_share, rejected_share:<rule kind>, error_share, latency_p95)"
            )
        return metric

    @field_validator("action")
    @classmethod
    def _known_action(cls, action: str) -> str:
        from driftgate.monitors.actions import action_names

        if action not in action_names():
            raise ValueError(f"unknown action '{action}' (known: {', '.join(action_names())})")
        return action

    @field_validator("window")
    @classmethod
    def _window_is_a_duration(cls, window: str) -> str:
        parse_duration(window)
        return window

    @field_validator("schedule")
    @classmethod
    def _schedule_is_a_cron(cls, schedule: str, info: ValidationInfo) -> str:
        try:
            return validate_cron(schedule)
        except ValueError as exc:  # name the monitor: the key is only its list index
            name = info.data.get("name")
            raise ValueError(f"monitor '{name}': {exc}" if name else str(exc)) from None

    @model_validator(mode="after")
    def _retrain_settings_need_retrain(self) -> Monitor:
        if self.retrain is not None and self.action != RETRAIN_ACTION:
            raise ValueError(
                f"retrain: settings of the retrain action, but this monitor's action is "
                f"'{self.action}' (set action: {RETRAIN_ACTION}, or remove retrain:)"
            )
        if self.action == RETRAIN_ACTION and self.retrain is None:
            self.retrain = RetrainSettings()
        return self

    @model_validator(mode="after")
    def _calibrated_needs_a_null(self) -> Monitor:
        # A statistic without a no-drift distribution cannot keep a false-alarm budget:
        # deciding it on its threshold under a "calibrated" monitor (and letting the
        # planner promise the budget) would be a promise nothing keeps.
        if self.calibrated and is_stattest_metric(self.metric):
            from driftgate.monitors.stattests import get_stattest

            if get_stattest(self.metric).null is None:
                raise ValueError(
                    f"monitor '{self.name}': statistic '{self.metric}' has no no-drift "
                    "distribution, so it cannot be calibrated to a false-alarm budget; set "
                    "calibrated: false to decide on its threshold alone"
                )
        return self

    @model_validator(mode="after")
    def _outputs_are_all(self) -> Monitor:
        if is_output_metric(self.metric) and self.features != "all":
            raise ValueError(
                f"metric {self.metric} judges the model's outputs, not features: "
                "features must be 'all' (the default)"
            )
        if split_metric(self.metric)[0] == PERFORMANCE_ESTIMATE and self.threshold < 0:
            raise ValueError(
                f"metric {self.metric}: threshold is the largest tolerated drop from the "
                f"reference estimate and must be >= 0, got {self.threshold:g}"
            )
        return self

    @property
    def length(self) -> pd.Timedelta:
        return parse_duration(self.window)

    @property
    def checks_per_horizon(self) -> int:
        """Scheduled checks in the false-alarm horizon (720 for hourly over 30d)."""
        return checks_in(self.schedule, self.false_alarms.horizon)

    def level(self, features: int) -> float | None:
        """Level of each feature's test per check, or None (not calibrated / contract)."""
        if not self.calibrated or self.metric.startswith(CONTRACT_PREFIX):
            return None
        if is_performance(self.metric):  # one test per window, whatever the features
            features = 1
        return per_test_level(
            self.false_alarms.rate, self.checks_per_horizon, features, self.consecutive_breaches
        )

    def feature_count(self, all_features: Iterable[str]) -> int:
        return len(list(all_features)) if self.features == "all" else len(self.features)


def check_monitors_against(
    monitors: Iterable[Monitor], features: Iterable[str], contract=None, *, where: str = ""
) -> None:
    """Refuse monitors that name what this project does not have.

    ``features`` are the model's features (its reference profile's, or the project
    config's); ``contract`` the project's :class:`data_contracts.Contract` (None: no
    contract). A drift monitor's features must be model features; a contract monitor
    needs a contract, its features must be contract columns, and its rule kind must be
    one the contract checks (on those columns). Raises ConfigError naming every problem,
    so a typo is an exit 2 at ``deploy`` or the drift check's start, never a silent
    ``ok`` or an ``error`` status at 3 a.m.
    """
    known = list(features)
    rules = contract.rules() if contract is not None else []
    problems = []
    for monitor in monitors:
        prefix = f"{where}monitor '{monitor.name}'"
        listed = [] if monitor.features == "all" else list(monitor.features)
        if is_performance(monitor.metric):
            if listed:
                problems.append(
                    f"{prefix}: features: a performance monitor judges the model's output, "
                    "not features; leave features out"
                )
            continue
        if _is_traffic(monitor.metric):
            fields = known + (list(contract.columns) if contract is not None else [])
            if listed and not monitor.metric.startswith("rejected_share"):
                problems.append(f"{prefix}: features: {monitor.metric} is per request; use all")
            elif unknown := [f for f in listed if f not in fields]:
                problems.append(
                    f"{prefix}: features: not fields of the model or contract: "
                    f"{', '.join(unknown)} (known: {', '.join(dict.fromkeys(fields))})"
                )
            continue
        if not monitor.metric.startswith(CONTRACT_PREFIX):
            unknown = [f for f in listed if f not in known]
            if unknown:
                problems.append(
                    f"{prefix}: features: not features of the model: {', '.join(unknown)} "
                    f"(known: {', '.join(known)})"
                )
            continue
        if contract is None:
            problems.append(f"{prefix}: metric {monitor.metric}: the project has no data contract")
            continue
        columns = list(contract.columns)
        unknown = [f for f in listed if f not in columns]
        if unknown:
            problems.append(
                f"{prefix}: features: not columns of contract '{contract.name}': "
                f"{', '.join(unknown)} (known: {', '.join(columns)})"
            )
            continue
        kind = monitor.metric.removeprefix(CONTRACT_PREFIX)
        if kind == "any":
            continue
        checked = {r.kind for r in rules if not listed or r.column in listed}
        if kind not in checked:
            on = f" on {', '.join(listed)}" if listed else ""
            problems.append(
                f"{prefix}: metric {monitor.metric}: contract '{contract.name}' checks no "
                f"'{kind}' rule{on} (it checks: {', '.join(sorted(checked))}), so it could "
                "never breach"
            )
    if problems:
        raise ConfigError("\n".join(problems))


def _decision_key(monitor: Monitor, features: int) -> tuple:
    return (monitor.threshold, monitor.level(features), monitor.effect_size_floor)


def drift_tests_of(monitors: list[Monitor]) -> dict[str, float]:
    """Drift test name -> threshold to pass to ``check_drift`` for these monitors.

    Two monitors on the same test with different thresholds (or levels, or floors)
    cannot share one drift computation's decision; the caller runs one check per
    distinct decision (see :func:`group_by_threshold`).
    """
    return {m.metric: m.threshold for m in monitors if is_stattest_metric(m.metric)}


def decision_options(monitors: list[Monitor], all_features: Iterable[str]) -> dict:
    """``check_drift`` keyword arguments deciding these monitors (one group of
    :func:`group_by_threshold`): thresholds, per-test levels and effect-size floors."""
    all_features = list(all_features)
    drift = [m for m in monitors if is_stattest_metric(m.metric)]
    levels = {
        m.metric: m.level(m.feature_count(all_features))
        for m in drift
        if m.level(m.feature_count(all_features)) is not None
    }
    floors = {m.metric: m.effect_size_floor for m in drift if m.effect_size_floor is not None}
    return {
        "thresholds": drift_tests_of(drift),
        "levels": levels,
        "effect_size_floor": floors or None,
    }


def group_by_threshold(
    monitors: list[Monitor], all_features: Iterable[str] = ()
) -> list[list[Monitor]]:
    """Split drift monitors into groups in which every test has a single decision
    (threshold, level, effect-size floor)."""
    all_features = list(all_features)
    groups: list[list[Monitor]] = []
    for monitor in monitors:
        if not is_stattest_metric(monitor.metric):
            continue
        key = _decision_key(monitor, monitor.feature_count(all_features))
        for group in groups:
            if all(
                m.metric != monitor.metric or _decision_key(m, m.feature_count(all_features)) == key
                for m in group
            ):
                group.append(monitor)
                break
        else:
            groups.append([monitor])
    return groups


def evaluate_monitor(
    monitor: Monitor, drift_report=None, contract_result=None, traffic=None
) -> MonitorResult:
    """Evaluate ``monitor`` on a window's drift report, contract result or traffic
    counts (:class:`monitors.traffic.TrafficCounts`)."""
    base = {
        "monitor": monitor.name,
        "metric": monitor.metric,
        "action": monitor.action,
        "threshold": monitor.threshold,
    }
    if _is_traffic(monitor.metric):
        from driftgate.monitors.traffic import evaluate_traffic

        return evaluate_traffic(monitor, traffic, base)
    if monitor.metric.startswith(CONTRACT_PREFIX):
        return _contract_monitor(monitor, contract_result, base)
    if is_performance(monitor.metric):
        return MonitorResult(
            **base,
            breached=False,
            observed=None,
            status="error",
            reason="a performance monitor is judged on the window's labels "
            "(monitors.performance.evaluate_performance), not on a drift report",
        )
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
        insufficient = any(r.status == "insufficient_data" for r in results)
        return MonitorResult(
            **base,
            breached=False,
            observed=None,
            status="insufficient_data" if insufficient else "no_data",
            reason="; ".join(reasons) or "no data in the window",
            level=results[0].level,
            min_detectable=_largest(r.min_detectable for r in results),
        )
    breached = sorted(r.feature for r in evaluated if r.drifted)
    if evaluated[0].direction == "p_value":
        observed = min(
            (r.adjusted_p_value if r.adjusted_p_value is not None else r.p_value) for r in evaluated
        )
    else:
        observed = max(r.value for r in evaluated)
    no_data = [r.feature for r in results if r.status != "ok"]
    reason = f"no data or too few rows for {', '.join(no_data)}" if no_data else ""
    p_values = [r.p_value for r in evaluated if r.level is not None and r.p_value is not None]
    return MonitorResult(
        **base,
        breached=bool(breached),
        observed=float(observed),
        breached_features=breached,
        reason=reason,
        p_value=min(p_values) if p_values else None,
        level=evaluated[0].level,
        bias_corrected=_largest(r.bias_corrected for r in evaluated),
        min_detectable=_largest(r.min_detectable for r in evaluated),
        effect_size_floor=_largest(r.effect_size_floor for r in evaluated),
        # The report says when a drift monitor is its bare threshold, not a budget.
        details={} if monitor.calibrated else {"calibrated": False},
    )


def _is_traffic(metric: str) -> bool:
    from driftgate.monitors.traffic import is_traffic_metric

    return is_traffic_metric(metric)


def _largest(values) -> float | None:
    present = [float(v) for v in values if v is not None]
    return max(present) if present else None


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
