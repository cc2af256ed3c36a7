"""Monitor rules: the production rules of ``gates.yaml``.

- :class:`Monitor`, the rule as configured (``metric``, ``features``, ``threshold``,
  ``schedule``, ``window``, ``action``, ``consecutive_breaches``), validated when the gate
  config loads: its metric and what a monitor of that metric must say by the metric's
  kind (:mod:`monitors.kinds`), its action against the actions registry, its schedule
  and window by :mod:`monitors.durations`;
- :func:`check_monitors_against`, the checks that need the project too (features of
  the model, rules of its contract), each kind's own, run where both are known: the
  drift check's start and ``driftgate deploy``'s plan;
- :func:`evaluate_monitor`, one rule on one piece of a window's evidence (the drift
  check judges them all at once through :func:`monitors.kinds.evaluate_all`).

The drift check itself runs with each monitor's threshold (``check_drift(...,
thresholds={metric: threshold})``), so "breached" here means exactly what the drift
engine decided, with its effect-size floor and corrections, and never a second rule.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import timedelta
from typing import Literal

import pandas as pd
from pydantic import Field, ValidationInfo, field_validator, model_validator

from driftgate.core.yamlconfig import ConfigError, StrictModel
from driftgate.monitors.budget import FalseAlarms, checks_in, per_scale_check_budgets
from driftgate.monitors.durations import MAX_WINDOW, parse_duration, validate_cron
from driftgate.monitors.evidence import Evidence
from driftgate.monitors.kinds import WindowEvidence, kind_of
from driftgate.monitors.kinds.contract import CONTRACT_RULE_KINDS  # noqa: F401 - re-exported
from driftgate.monitors.kinds.drift import (  # noqa: F401 - re-exported for existing callers
    decision_options,
    drift_tests_of,
    group_by_threshold,
)
from driftgate.monitors.results import (  # noqa: F401 - re-exported for existing callers
    CONTRACT_PREFIX,
    PERFORMANCE_ESTIMATE,
    PREDICTION_DRIFT,
    MonitorResult,
    split_metric,
)


def is_output_metric(metric: str) -> bool:
    """True for the metrics judged on the model's outputs (:mod:`monitors.outputs`)."""
    return kind_of(metric).features_must_be_all


def is_stattest_metric(metric: str) -> bool:
    """True for a drift statistic on the features (``ks``, ``kl``, ...)."""
    return kind_of(metric).per_feature_plan


RETRAIN_ACTION = "retrain"
# A cooldown is compared, never read, so it is not bounded like a window; this bound only
# keeps it inside what a timestamp can hold (pandas: about 292 years).
_LONGEST_COOLDOWN = pd.Timedelta(days=100 * 366)


def _checked_duration(value: str | None, key: str, longest: pd.Timedelta | None) -> str | None:
    """``value`` when it is a duration of at most ``longest``; else the error, naming
    ``key`` (parse_duration's messages say "window")."""
    if value is not None:
        try:
            parse_duration(value, longest=longest)
        except ValueError as exc:
            raise ValueError(str(exc).replace("window", key, 1)) from None
    return value


class RetrainDataSettings(StrictModel):
    """``retrain.data:`` what a retrain learns from (all optional; the defaults are the
    configured data plus the breaching window's labelled records)."""

    recent: str | None = Field(
        None,
        description="labelled production records this long before the breaching window's "
        "end (e.g. 1095d), instead of the breaching window alone",
    )
    rows: int | None = Field(
        None, ge=3, description="at most this many of the newest labelled records"
    )
    reference: Literal["include", "exclude"] = Field(
        "include",
        description="exclude: train, validate and test on the recent labelled records "
        "alone, split in time order (the configured data is the past the model "
        "no longer describes); include: append them to the configured splits",
    )

    @field_validator("recent")
    @classmethod
    def _is_a_duration(cls, value: str | None) -> str | None:
        return _checked_duration(value, "recent", longest=None)  # read in chunks

    @property
    def recent_length(self) -> pd.Timedelta | None:
        return None if self.recent is None else parse_duration(self.recent, longest=None)

    @property
    def is_default(self) -> bool:
        return self.recent is None and self.rows is None and self.reference == "include"


class RetrainSettings(StrictModel):
    """``retrain:`` on a monitor whose ``action`` is ``retrain`` (all optional)."""

    data: RetrainDataSettings = Field(
        default_factory=RetrainDataSettings,
        description="what the retrain learns from: recent labelled records, with or "
        "without the configured data",
    )

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
        description="event time (the windows' time, not the clock's) from the end of the "
        "window of the last retrain that reached an outcome to the end of a breaching "
        "window before that breach may start another retrain (a drift that persists "
        "breaches every window; each retrain costs a training run). Not bounded by a "
        "window's 366 days (it is compared, never read): up to 36600d. None: any breach "
        "once the previous retrain ended",
    )
    cooldown_windows: int | None = Field(
        None,
        ge=1,
        description="the same cooldown counted in windows: this many lengths of the "
        "window judged (the monitor's window, or drift-check --window) of event time "
        "(with cooldown as well: the longer of the two)",
    )

    @field_validator("lease", "approval_timeout")
    @classmethod
    def _is_a_duration(cls, value: str, info) -> str:
        return _checked_duration(value, info.field_name, longest=MAX_WINDOW)

    @field_validator("cooldown")
    @classmethod
    def _cooldown_is_a_duration(cls, value: str | None) -> str | None:
        # Not bounded like a window (read whole): a replay of yearly windows may want
        # decades of event time between retrains.
        return _checked_duration(value, "cooldown", longest=_LONGEST_COOLDOWN)

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
        """``cooldown`` as a duration of event time (None: not set)."""
        if self.cooldown is None:
            return None
        return parse_duration(self.cooldown, longest=_LONGEST_COOLDOWN).to_pytimedelta()

    def cooldown_span(self, window: timedelta) -> timedelta | None:
        """The event time a breach must be past the last retrain's window end, for a
        judged window of ``window`` length: the longer of ``cooldown`` and ``cooldown_windows``
        windows; None when neither is set."""
        spans = [self.cooldown_length]
        if self.cooldown_windows is not None:
            spans.append(self.cooldown_windows * window)
        spans = [span for span in spans if span is not None]
        return max(spans) if spans else None

    def cooldown_words(self) -> str:
        """The cooldown as configured, for people (``30d``, ``3 windows``, both)."""
        parts = [self.cooldown] if self.cooldown is not None else []
        if self.cooldown_windows is not None:
            parts.append(f"{self.cooldown_windows} window(s)")
        return " / ".join(parts)

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
    model's outputs (``prediction_drift``, ``performance_estimate:<metric>`` of the task,
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
    evidence: Evidence = Field(
        default_factory=Evidence,
        description="drift statistics: windows pooled per test (monitors.evidence); the "
        "default [1] judges each window alone",
    )

    @field_validator("metric")
    @classmethod
    def _known_metric(cls, metric: str) -> str:
        kind_of(metric).validate_metric(metric)  # its kind knows its values
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
    def _fits_its_kind(self) -> Monitor:
        kind_of(self.metric).validate(self)  # what a monitor of this kind must say
        return self

    @property
    def length(self) -> pd.Timedelta:
        return parse_duration(self.window)

    @property
    def checks_per_horizon(self) -> int:
        """Scheduled checks in the false-alarm horizon (720 for hourly over 30d)."""
        return checks_in(self.schedule, self.false_alarms.horizon)

    def level(self, features: int) -> float | None:
        """Level of each feature's test per check on the window alone, or None (not
        calibrated / contract)."""
        levels = self.scale_levels(features)
        return None if levels is None else levels[1]

    def scale_levels(self, features: int) -> dict[int, float] | None:
        """Evidence scale (windows pooled) -> level of each feature's test per check,
        the budget split over the scales (:mod:`monitors.evidence`); None when the
        monitor has no level."""
        tests = kind_of(self.metric).level_tests(self, features)
        if not self.calibrated or tests is None:
            return None
        budgets = per_scale_check_budgets(
            self.false_alarms.rate,
            self.checks_per_horizon,
            self.consecutive_breaches,
            tuple(self.evidence.scales),
        )
        return {scale: q / max(tests, 1) for scale, q in budgets.items()}

    def feature_count(self, all_features: Iterable[str]) -> int:
        return len(list(all_features)) if self.features == "all" else len(self.features)


def check_monitors_against(
    monitors: Iterable[Monitor],
    features: Iterable[str],
    contract=None,
    *,
    where: str = "",
    task: str | None = None,
) -> None:
    """Refuse monitors that name what this project does not have.

    ``features`` are the model's features (its reference profile's, a mapping to each
    feature's profile, whose types a drift statistic is checked against; or the
    project config's names); ``contract`` the project's :class:`data_contracts.Contract` (None: no
    contract). A drift monitor's features must be model features; a contract monitor
    needs a contract, its features must be contract columns, and its rule kind must be
    one the contract checks (on those columns). ``task``: the champion's (where it is
    known), which a kind checks its metric against (``performance:rmse`` or
    ``performance_estimate:rmse`` on a classifier). Raises ConfigError naming every problem,
    so a typo is an exit 2 at ``deploy`` or the drift check's start, never a silent
    ``ok`` or an ``error`` status at 3 a.m.
    """
    # A mapping (a reference profile's features) carries each feature's type, which a
    # kind may check its monitors against; a list is names only.
    known = features if isinstance(features, Mapping) else list(features)
    problems = [
        f"{where}monitor '{monitor.name}': {problem}"
        for monitor in monitors
        for problem in [
            *kind_of(monitor.metric).check_against(monitor, known, contract),
            *([] if task is None else kind_of(monitor.metric).check_against_model(monitor, task)),
        ]
    ]
    if problems:
        raise ConfigError("\n".join(problems))


def evaluate_monitor(
    monitor: Monitor, drift_report=None, contract_result=None, traffic=None
) -> MonitorResult:
    """Evaluate ``monitor`` on a window's drift report, contract result or traffic
    counts (:class:`monitors.traffic.TrafficCounts`), by its kind. The drift check
    gathers all of a window's evidence at once (:func:`monitors.kinds.evaluate_all`)."""
    evidence = WindowEvidence(
        drift_report=drift_report,
        contract_result=contract_result,
        traffic=traffic,
        labels_missing_reason="a performance monitor is judged on the window's labels "
        "(monitors.performance.evaluate_performance), not on a drift report",
    )
    (result,) = kind_of(monitor.metric).evaluate([monitor], evidence)
    return result
