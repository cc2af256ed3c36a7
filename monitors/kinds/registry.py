"""Monitor kinds: what a monitor's ``metric`` is judged on, one registered class each.

A metric names its kind by its form (``contract:<rule kind>``, ``prediction_drift``,
``performance_estimate:<metric>``, ``performance:<metric>``, a traffic metric, or a
registered drift statistic). Everything that differs between kinds lives in the kind:
which metrics it accepts (:meth:`MonitorKind.validate_metric`, at config load), what a
monitor of it must say (:meth:`validate`), what it needs of the project
(:meth:`check_against`: features, contract rules) and of the model
(:meth:`check_against_model`: its task), how its per-check level is split
(:meth:`level_tests`), whether the planner has per-feature figures for it, whether it
is judged again as labels arrive, and how a window is judged
(:meth:`evaluate`, on the :class:`WindowEvidence` the drift check gathers). The rules,
the drift check and the planner loop over kinds; none of them tests a metric's prefix.

Adding a kind is one module in this package that calls :func:`register`; kinds are
asked in registration order, the drift statistics last (their names have no form).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

from driftgate.monitors.results import MonitorResult


@dataclass(frozen=True)
class LabelledOutputs:
    """A window's labelled records of the champion: the task, its classes, the labels'
    numbers ``y`` and the stored outputs of the same records."""

    task: str
    classes: tuple[str, ...]
    y: Any  # np.ndarray
    outputs: Any  # np.ndarray


@dataclass
class WindowEvidence:
    """What one window offers the monitor kinds, gathered by the drift check.

    Each kind reads its part: the profile and the window's counts (drift statistics;
    ``with_rejected`` adds the refused records, lazily), a ready ``drift_report`` when
    the caller computed one, the contract result, the stored outputs (``samples``), the
    traffic counts, and, through ports the caller supplies (the label store and the
    registry are not the domain's to open), the labelled records and the champion's
    gate-time metrics. A part that is None is absent from this window.
    """

    profile: Any = None
    counts: Any = None
    with_rejected: Callable[[], Any] | None = None
    drift_report: Any = None
    contract_result: Any = None
    samples: Any = None
    traffic: Any = None
    labelled: Callable[[], LabelledOutputs] | None = None
    labels_missing_reason: str = "no labels for this window"
    baseline: Callable[[str], float | None] | None = None
    decision_threshold: float = 0.5
    # The counts of the last ``k`` windows, this one included, read again from the
    # sample store (evidence across windows, monitors.evidence); None: no history (a
    # --source file), and the pooled scales are reported as not tested.
    pooled: Callable[[int], Any] | None = None


@dataclass(frozen=True)
class KindPlan:
    """What ``driftgate monitors plan`` can say of a monitor of a kind without
    per-feature figures (:meth:`MonitorKind.plan`): its per-check ``level`` over
    ``tests`` tests (None: no level; the planner turns them into false alarms per
    month), the smallest value a window of the planned rows can flag
    (``min_detectable``, in ``units``), and ``note``: one line saying what the figures
    leave out and why, or why there are none. Every monitor gets a figure or a reason."""

    level: float | None = None
    tests: int = 1
    min_detectable: float | None = None
    units: str = ""
    note: str = ""


def base_of(monitor) -> dict:
    """The fields every result of ``monitor`` starts from."""
    return {
        "monitor": monitor.name,
        "metric": monitor.metric,
        "action": monitor.action,
        "threshold": monitor.threshold,
    }


def error_result(monitor, reason: str, status: str = "error") -> MonitorResult:
    return MonitorResult(**base_of(monitor), breached=False, observed=None, status=status,
                         reason=reason)  # fmt: skip


class MonitorKind:
    """One kind of monitor (see the module docstring). Subclasses set ``name`` and
    ``syntax`` and implement :meth:`matches`, :meth:`validate_metric`, :meth:`evaluate`."""

    name: ClassVar[str]
    syntax: ClassVar[str]  # how its metrics are written, for the unknown-metric message
    # Figures per feature in `driftgate monitors plan` (the drift statistics' nulls);
    # any other kind answers :meth:`plan`.
    per_feature_plan: ClassVar[bool] = False
    # Judged again as a window's labels arrive (its state advances by label counts).
    rejudged_as_labels_arrive: ClassVar[bool] = False
    # The result is about the model's outputs or requests, not named features.
    features_must_be_all: ClassVar[bool] = False
    # Tests the pooled last windows too (``evidence: {scales: ...}``, monitors.evidence).
    pools_windows: ClassVar[bool] = False

    def matches(self, metric: str) -> bool:
        raise NotImplementedError

    def validate_metric(self, metric: str) -> None:
        """Raise ValueError naming the known values when ``metric`` is not one of them."""

    def validate(self, monitor) -> None:
        """Raise ValueError when the monitor's other settings do not fit this kind."""
        if self.features_must_be_all and monitor.features != "all":
            raise ValueError(
                f"metric {monitor.metric} judges the model's outputs, not features: "
                "features must be 'all' (the default)"
            )
        if monitor.evidence.pooled and not self.pools_windows:
            pooling = [k.name for k in KINDS if k.pools_windows]
            raise ValueError(
                f"evidence.scales: metric {monitor.metric} is judged on one window at a "
                f"time; only {', '.join(pooling)} monitors pool windows (set scales: [1] "
                "or remove evidence:)"
            )

    def check_against(self, monitor, features: list[str], contract) -> list[str]:
        """Problems of ``monitor`` in this project (its ``features`` and ``contract``)."""
        listed = [] if monitor.features == "all" else list(monitor.features)
        unknown = [f for f in listed if f not in features]
        if unknown:
            return [
                f"features: not features of the model: {', '.join(unknown)} "
                f"(known: {', '.join(features)})"
            ]
        return []

    def check_against_model(self, monitor, task: str) -> list[str]:
        """Problems of ``monitor`` with the champion, a model of ``task`` (``binary``,
        ``multiclass``, ``regression``): a metric that model cannot have. Asked where
        the champion is known (the drift check's start, ``monitors plan``)."""
        return []

    def plan(self, monitor, profile, rows: int) -> KindPlan:
        """What ``monitors plan`` shows for ``monitor`` at ``rows`` rows per window on
        the champion's ``profile`` (kinds without ``per_feature_plan``). By default its
        level over one test, or, for a kind with no level, why there is no budget."""
        if self.level_tests(monitor, 1) is None:
            return KindPlan(
                note=f"{monitor.metric} is a count over its threshold, not a test: no "
                "level or false-alarm budget applies"
            )
        return KindPlan(level=monitor.level(1), note=uncalibrated_note(monitor))

    def observed_is_p_value(self, metric: str) -> bool:
        """Whether a result's ``observed`` value for ``metric`` is a p-value, which
        breaches *below* its threshold: what a stored review (which keeps only its
        metric) is worded by (:func:`monitors.results.breach_comparison`)."""
        return False

    def level_tests(self, monitor, features: int) -> int | None:
        """How many tests a check's level is split over (None: the kind has no level)."""
        return features

    def evaluate(self, monitors: list, evidence: WindowEvidence) -> list[MonitorResult]:
        raise NotImplementedError


def uncalibrated_note(monitor) -> str:
    """The plan's note for a monitor that says ``calibrated: false``, else empty."""
    if monitor.calibrated:
        return ""
    return "calibrated: false: decided on its bare threshold, so no false-alarm budget"


KINDS: list[MonitorKind] = []


def register(kind: MonitorKind) -> MonitorKind:
    if any(k.name == kind.name for k in KINDS):
        raise ValueError(f"monitor kind {kind.name!r} registered twice")
    # Kinds are asked in order and the drift statistics, whose names have no form,
    # answer for anything else: a new kind goes before them.
    fallback = [i for i, k in enumerate(KINDS) if getattr(k, "fallback", False)]
    KINDS.insert(fallback[0] if fallback else len(KINDS), kind)
    return kind


def kind_of(metric: str) -> MonitorKind:
    """The kind a metric belongs to (the drift statistics when no other claims it)."""
    for kind in KINDS:
        if kind.matches(metric):
            return kind
    raise ValueError(f"no monitor kind takes metric {metric!r} (known: {known_syntax()})")


def known_syntax() -> str:
    return ", ".join(kind.syntax for kind in KINDS)


def evaluate_all(monitors: list, evidence: WindowEvidence) -> list[MonitorResult]:
    """Every monitor judged by its kind, in the monitors' order."""
    results: list[MonitorResult] = []
    for kind in KINDS:
        mine = [m for m in monitors if kind_of(m.metric) is kind]
        if mine:
            results.extend(kind.evaluate(mine, evidence))
    order = {m.name: i for i, m in enumerate(monitors)}
    return sorted(results, key=lambda r: order[r.monitor])
