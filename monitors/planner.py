"""What a monitor can promise at a given traffic: the figures of ``driftgate monitors plan``.

For one monitor, a reference profile and the rows a window holds, from the profile
alone (:mod:`monitors.nulls`, :mod:`monitors.budget`):

* ``false_alarms_per_month``: the bound on expected false fires per 30 days of the
  calibrated decision, and ``old_rule_per_month``: what the bare threshold would do
  (simulated no-drift windows of this size);
* ``min_rows``: the fewest rows per window for which the smallest value a window can
  flag is within ``FACTOR`` (2) times the threshold, i.e. the rule's threshold, not
  the sample size, says what breaches;
* ``smallest_shift``: the smallest change detected with 80% power within ``within``
  checks, on the worst feature, in the statistic's units (``shift_units``: a mean
  shift in reference standard deviations, or a rise of the missing share);
* ``pooled_smallest_shift``: the same with evidence across windows
  (:mod:`monitors.evidence`), at the monitor's ``evidence.scales`` or, for a monitor
  that judges each window alone, at :data:`SUGGESTED_SCALES` (what turning it on would
  buy); ``pooled_scales`` says which. A lower bound on the rule's power: a scale ``k``
  counts only at the check where its pool first holds ``k`` shifted windows (and the
  ``consecutive_breaches - 1`` checks after it), so ``k + consecutive - 1 <= within``;
* ``warnings``: when the schedule and traffic cannot support the rule.

A monitor of any other kind (contract, traffic, the model's outputs, realized
performance) is planned by its kind (:meth:`monitors.kinds.MonitorKind.plan`): its
level and false alarms per month where it has a level, what a window of the planned
rows can flag where the kind can say (an estimated metric's drop, a refused share),
and ``note``, one line saying what the figures leave out and why (a contract rule is
a fact, not a test; a realized metric needs the labels a window gets). No monitor is
left at ``-`` without a reason.

Each figure comes from the statistic's own null (``StatTest.null``,
:class:`monitors.stattests.registry.NullModel`): its profile-only ``bound``, its
``smallest_shift`` and its ``bare_rate``. A statistic whose null has no bound (``ks``,
``chi2``: decided on their own p-values) shows its budget and level only; one without a
null is not calibrated (``calibrated: false``) and promises nothing.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import timedelta

import numpy as np

from driftgate.monitors.budget import expected_false_fires
from driftgate.monitors.evidence import Evidence
from driftgate.monitors.kinds import kind_of
from driftgate.monitors.nulls import decision_bound
from driftgate.monitors.rules import Monitor
from driftgate.monitors.stattests import NullModel, get_stattest

POWER = 0.8
FACTOR = 2.0
MONTH_DAYS = 30
# The scales the planner shows for a monitor that judges each window alone.
SUGGESTED_SCALES = (1, 3, 12, 24)


@dataclass
class MonitorPlan:
    monitor: str
    metric: str
    window: str
    schedule: str
    rows_per_window: int
    checks_per_month: int
    level: float | None
    false_alarms_per_month: float | None
    old_rule_per_month: float | None
    min_rows: int | None
    min_detectable: float | None
    smallest_shift: float | None
    shift_units: str
    warnings: list[str] = field(default_factory=list)
    pooled_scales: list[int] = field(default_factory=list)
    pooled_smallest_shift: float | None = None
    # What the figures leave out, or why there are none (kinds without per-feature
    # figures: MonitorKind.plan).
    note: str = ""

    def to_dict(self) -> dict:
        return dict(self.__dict__)


def _features(monitor: Monitor, profile) -> list:
    names = list(profile.features) if monitor.features == "all" else list(monitor.features)
    return [profile.features[n] for n in names if n in profile.features]


def _per_check_power(within: int, consecutive: int) -> float:
    """Per-check power needed for POWER within ``within`` checks (runs of ``consecutive``)."""
    blocks = max(within // consecutive, 1)
    return (1 - (1 - POWER) ** (1 / blocks)) ** (1 / consecutive)


def _bounded(null: NullModel | None) -> bool:
    """Whether the statistic's null can bound a decision from the profile alone."""
    return null is not None and type(null).bound is not NullModel.bound


def _smallest(metric, null, reference, n, monitor, level, needed, rng) -> float | None:
    bound = decision_bound(metric, reference, n, monitor.threshold, level)
    if bound.insufficient:
        return math.inf
    return null.smallest_shift(metric, reference, n, bound.min_detectable, needed, rng)


def _old_rule_rate(metric, null, features, n, threshold) -> float | None:
    """Chance that a no-drift check of ``n`` rows has a feature at or over the bare
    threshold (where the statistic's null can say; simulated for the binned ones)."""
    if null is None or type(null).bare_rate is NullModel.bare_rate:
        return None
    quiet = 1.0
    for reference in features:
        rate = null.bare_rate(metric, reference, n, threshold)
        if rate is None:
            return None
        quiet *= 1 - rate
    return 1 - quiet


def _min_rows(metric, null, features, monitor, level) -> int | None:
    if not _bounded(null):
        return None

    def good(n: int) -> bool:
        for reference in features:
            bound = decision_bound(metric, reference, n, monitor.threshold, level)
            if bound.insufficient or bound.min_detectable > FACTOR * monitor.threshold:
                return False
        return True

    low, high = 1, 2
    while not good(high):
        low, high = high, high * 2
        if high > 10_000_000:
            return None
    while high - low > max(1, low // 20):
        middle = (low + high) // 2
        low, high = (low, middle) if good(middle) else (middle, high)
    return high


def _pooled_smallest(metric, null, features, monitor, rows, within, rng) -> float:
    """The smallest shift caught with POWER within ``within`` checks by the pooled rule
    of ``monitor`` (its scales; module docstring): the best of its scales, each on the
    worst feature."""
    levels = monitor.scale_levels(len(features))
    consecutive = monitor.consecutive_breaches
    best = math.inf
    for windows, level in levels.items():
        if windows == 1:
            needed = _per_check_power(within, consecutive)
        elif windows + consecutive - 1 <= within:
            # ``consecutive`` checks in a row, each pooling k shifted windows: all breach
            # with probability >= 1 - consecutive * (1 - p) (union bound on the misses).
            needed = 1 - (1 - POWER) / consecutive
        else:
            continue
        worst = 0.0
        for reference in features:
            shift = _smallest(metric, null, reference, rows * windows, monitor, level, needed, rng)
            worst = max(worst, math.inf if shift is None else shift)
        best = min(best, worst)
    return best


def plan_monitor(
    monitor: Monitor, profile, rows_per_window: int, within: int = 12, *, pooled: bool = True
) -> MonitorPlan:
    """The figures and warnings of one monitor at ``rows_per_window`` (module docstring).
    ``pooled=False`` leaves out the pooled rule's figure (a few seconds of simulation per
    monitor; ``driftgate deploy`` wants the warnings only)."""
    from driftgate.monitors.budget import checks_in

    metric = monitor.metric
    month = checks_in(monitor.schedule, timedelta(days=MONTH_DAYS))
    units = NullModel.shift_units
    plan = MonitorPlan(
        monitor=monitor.name,
        metric=metric,
        window=monitor.window,
        schedule=monitor.schedule,
        rows_per_window=rows_per_window,
        checks_per_month=month,
        level=None,
        false_alarms_per_month=None,
        old_rule_per_month=None,
        min_rows=None,
        min_detectable=None,
        smallest_shift=None,
        shift_units=units,
    )
    kind = kind_of(metric)
    if not kind.per_feature_plan:  # a contract, outputs, labels or traffic: its kind says
        figures = kind.plan(monitor, profile, rows_per_window)
        plan.level, plan.min_detectable, plan.note = (
            figures.level,
            figures.min_detectable,
            figures.note,
        )
        plan.shift_units = figures.units or plan.shift_units
        if figures.level is not None:
            plan.false_alarms_per_month = expected_false_fires(
                figures.level, month, figures.tests, monitor.consecutive_breaches
            )
        if plan.min_detectable is not None and math.isinf(plan.min_detectable):
            plan.warnings.append(
                f"{monitor.name}: {rows_per_window} rows per {monitor.window} window is too "
                "few for any decision: every check is insufficient_data"
            )
        return plan
    null = get_stattest(metric).null
    if null is not None:
        plan.shift_units = null.shift_units
    features = _features(monitor, profile)
    level = monitor.level(len(features))
    old = _old_rule_rate(metric, null, features, rows_per_window, monitor.threshold)
    plan.old_rule_per_month = None if old is None else old * month
    if level is None:
        return plan
    plan.level = level
    plan.false_alarms_per_month = expected_false_fires(
        level, month, len(features), monitor.consecutive_breaches
    )
    rng = np.random.default_rng(0)
    needed = _per_check_power(within, monitor.consecutive_breaches)
    detectable, shifts = [], []
    for reference in features:
        if not _bounded(null):
            break
        bound = decision_bound(metric, reference, rows_per_window, monitor.threshold, level)
        detectable.append(math.inf if bound.insufficient else bound.min_detectable)
        shift = _smallest(metric, null, reference, rows_per_window, monitor, level, needed, rng)
        if shift is not None:
            shifts.append(shift)
    plan.min_detectable = max(detectable) if detectable else None
    plan.smallest_shift = max(shifts) if shifts else None
    if pooled and _bounded(null) and plan.smallest_shift is not None:
        rule = monitor
        if not monitor.evidence.pooled:
            rule = monitor.model_copy(update={"evidence": Evidence(scales=list(SUGGESTED_SCALES))})
        plan.pooled_scales = list(rule.evidence.scales)
        plan.pooled_smallest_shift = _pooled_smallest(
            metric, null, features, rule, rows_per_window, within, rng
        )
    plan.min_rows = _min_rows(metric, null, features, monitor, level)
    name = f"{monitor.name}: {rows_per_window} rows per {monitor.window} window"
    if plan.min_detectable is not None and math.isinf(plan.min_detectable):
        plan.warnings.append(
            f"{name} is too few for any decision: every check is insufficient_data"
        )
    elif plan.min_rows is not None and rows_per_window < plan.min_rows:
        factor = math.ceil(plan.min_rows / max(rows_per_window, 1))
        plan.warnings.append(
            f"{name} is too few for {metric} {monitor.threshold:g}: it can only flag "
            f"{metric} >= {plan.min_detectable:.3g} — use a {factor}x longer window or "
            f">= {plan.min_rows} rows"
        )
    if plan.smallest_shift is not None and math.isinf(plan.smallest_shift):
        plan.warnings.append(
            f"{name}: no shift is detected with {POWER:.0%} power within {within} checks"
        )
    return plan


def _pooled_cell(plan: MonitorPlan, unit: str) -> str:
    """``0.35 std [1,3,12,24]``: the pooled rule's smallest shift and its scales."""
    if plan.pooled_smallest_shift is None:
        return "-"
    value = plan.pooled_smallest_shift
    shift = "never" if math.isinf(value) else f"{value:.3g}{unit}"
    return f"{shift} [{','.join(map(str, plan.pooled_scales))}]"


def describe(plans: list[MonitorPlan], within: int) -> str:
    """The planner's table and its warnings, for the terminal."""
    head = (
        "monitor",
        "metric",
        "rows/window",
        "checks/month",
        "level",
        "false/month",
        "old rule/month",
        "min rows",
        "flags >=",
        f"80% within {within}",
        "pooled",
    )

    def number(value, spec=".3g"):
        if value is None:
            return "-"
        return "never" if math.isinf(value) else format(value, spec)

    rows = [head]
    for p in plans:
        shift = number(p.smallest_shift)
        unit = " std" if p.shift_units == "reference std" else ""
        rows.append(
            (
                p.monitor,
                p.metric,
                str(p.rows_per_window),
                str(p.checks_per_month),
                number(p.level, ".2g"),
                number(p.false_alarms_per_month, ".2g"),
                number(p.old_rule_per_month, ".3g"),
                number(p.min_rows, "d") if p.min_rows is not None else "-",
                number(p.min_detectable),
                shift + (unit if shift not in ("-", "never") else ""),
                _pooled_cell(p, unit),
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    notes = [f"{p.monitor}: {p.note}" for p in plans if p.note]
    if notes:
        lines += ["", *(f"note: {n}" for n in notes)]
    warnings = [w for p in plans for w in p.warnings]
    if warnings:
        lines += ["", *(f"warning: {w}" for w in warnings)]
    return "\n".join(lines)
