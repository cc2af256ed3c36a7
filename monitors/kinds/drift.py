"""Drift statistics on the features (``ks``, ``kl``, ``missing_share``, ... any metric
registered in :mod:`monitors.stattests`): each feature's statistic on the window's
counts against the reference profile, decided at the monitor's per-feature level and
the window's size (:mod:`monitors.nulls`, the statistic's own null).

Monitors on the same statistic with different decisions (threshold, level, effect-size
floor) get one drift computation each (:func:`group_by_threshold`); ``population: all``
monitors are judged on the counts with the refused records added.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from driftgate.monitors.kinds.registry import (
    MonitorKind,
    WindowEvidence,
    base_of,
    error_result,
    register,
)
from driftgate.monitors.results import MonitorResult


class DriftKind(MonitorKind):
    name = "drift"
    syntax = "a drift statistic (ks, kl, ...)"
    per_feature_plan = True
    pools_windows = True
    fallback = True  # a metric no other kind claims is a statistic's name

    def matches(self, metric: str) -> bool:
        return ":" not in metric

    def validate_metric(self, metric: str) -> None:
        from driftgate.monitors.stattests import STATTESTS

        if metric not in STATTESTS:
            others = ", ".join(k.syntax for k in _other_kinds())
            raise ValueError(
                f"unknown statistic '{metric}' (known: {', '.join(sorted(STATTESTS))}, or {others})"
            )

    def observed_is_p_value(self, metric: str) -> bool:
        from driftgate.monitors.stattests import STATTESTS

        test = STATTESTS.get(metric)
        return test is not None and test.direction == "p_value"

    def validate(self, monitor) -> None:
        # A statistic without a no-drift distribution cannot keep a false-alarm budget:
        # deciding it on its threshold under a "calibrated" monitor (and letting the
        # planner promise the budget) would be a promise nothing keeps.
        from driftgate.monitors.stattests import get_stattest

        super().validate(monitor)
        if monitor.evidence.pooled and not monitor.calibrated:
            raise ValueError(
                f"monitor '{monitor.name}': evidence.scales pools windows, which needs the "
                "statistic's no-drift distribution at the pooled size: remove "
                "calibrated: false, or set scales: [1]"
            )
        if monitor.evidence.pooled and monitor.population == "all":
            # The store keeps the refused records' features per window too, but pooling
            # them is not built: a pooled test on accepted rows under population: all
            # would judge a different population than the window's own test.
            raise ValueError(
                f"monitor '{monitor.name}': evidence.scales pools accepted samples only; "
                "it cannot be combined with population: all"
            )
        if monitor.calibrated and get_stattest(monitor.metric).null is None:
            raise ValueError(
                f"monitor '{monitor.name}': statistic '{monitor.metric}' has no no-drift "
                "distribution, so it cannot be calibrated to a false-alarm budget; set "
                "calibrated: false to decide on its threshold alone"
            )

    def check_against(self, monitor, features, contract) -> list[str]:
        """Names, then (where the features' types are known: a reference profile's
        features) whether the statistic applies to them. ``chi2`` on an all-numeric
        model was accepted and reported ``error`` on every window, exit 0."""
        problems = super().check_against(monitor, features, contract)
        if problems or not isinstance(features, Mapping):
            return problems
        from driftgate.monitors.stattests import get_stattest

        test = get_stattest(monitor.metric)
        types = {name: getattr(profile, "type", profile) for name, profile in features.items()}
        chosen = list(types) if monitor.features == "all" else list(monitor.features)
        unfit = [name for name in chosen if not test.accepts(types[name])]
        applies = f"statistic '{monitor.metric}' applies to {' and '.join(test.feature_types)}"
        if monitor.features == "all" and len(unfit) == len(chosen):
            shown = ", ".join(f"{name} ({types[name]})" for name in chosen)
            return [f"{applies} features, and the model has none: {shown}"]
        if monitor.features != "all" and unfit:
            shown = ", ".join(f"{name} is {types[name]}" for name in unfit)
            return [f"{applies} features: {shown}"]
        return []

    def evaluate(self, monitors, evidence: WindowEvidence) -> list[MonitorResult]:
        if evidence.drift_report is not None:
            return [judge_report(m, evidence.drift_report) for m in monitors]
        if evidence.profile is None or evidence.counts is None:
            return [error_result(m, "no drift report for this window") for m in monitors]
        from driftgate.monitors import check_drift_counts

        features = list(evidence.profile.features)
        everyone = [m for m in monitors if m.population == "all"]
        populations = [([m for m in monitors if m.population != "all"], lambda: evidence.counts)]
        if everyone:
            populations.append((everyone, evidence.with_rejected or (lambda: evidence.counts)))
        results = []
        for members, counts_of in populations:
            groups = group_by_threshold(members, features)
            counts = counts_of() if groups else None
            for group in groups:
                report = check_drift_counts(
                    evidence.profile,
                    counts,
                    tests=sorted({m.metric for m in group}),
                    **decision_options(group, features),
                )
                results.extend(judge_report(m, report) for m in group)
        return [with_pooled_evidence(r, _monitor(monitors, r), evidence) for r in results]


def _monitor(monitors, result):
    return next(m for m in monitors if m.name == result.monitor)


def with_pooled_evidence(window_result: MonitorResult, monitor, evidence) -> MonitorResult:
    """The window's result, breached too when a pooled scale breaches
    (:mod:`monitors.evidence`). The window's own decision stays in the result's fields
    (observed, p-value, level, min_detectable: the window alone) and in
    ``details["window_breached"]``; each scale's decision is in ``details["scales"]``
    and the span that breached in ``details["evidence"]`` and the reason."""
    from dataclasses import replace

    from driftgate.monitors import check_drift_counts
    from driftgate.monitors.evidence import span_text

    if not monitor.evidence.pooled or window_result.status == "error":
        return window_result
    features = list(evidence.profile.features) if evidence.profile is not None else []
    levels = monitor.scale_levels(monitor.feature_count(features)) or {}
    scales = [
        {
            "windows": 1,
            "rows": evidence.counts.rows if evidence.counts is not None else None,
            "breached": window_result.breached,
            "status": window_result.status,
            "p_value": window_result.p_value,
            "level": window_result.level,
            "features": list(window_result.breached_features),
        }
    ]
    breached_by = None
    for windows in monitor.evidence.scales[1:]:
        counts = None if evidence.pooled is None else evidence.pooled(windows)
        if counts is None:
            scales.append({"windows": windows, "status": "no_data", "reason": "no history"})
            continue
        options = decision_options([monitor], features)
        options["levels"] = {monitor.metric: levels[windows]}
        report = check_drift_counts(evidence.profile, counts, tests=[monitor.metric], **options)
        pooled = judge_report(monitor, report)
        scales.append(
            {
                "windows": windows,
                "rows": counts.rows,
                "breached": pooled.breached,
                "status": pooled.status,
                "p_value": pooled.p_value,
                "level": pooled.level,
                "observed": pooled.observed,
                "min_detectable": pooled.min_detectable,
                "features": list(pooled.breached_features),
            }
        )
        if pooled.breached and breached_by is None:
            breached_by = scales[-1]  # the shortest span that shows it: the most recent
    details = {**window_result.details, "scales": scales,
               "window_breached": window_result.breached}  # fmt: skip
    if breached_by is None:
        return replace(window_result, details=details)
    span = span_text(breached_by["windows"], breached_by["rows"])
    details["evidence"] = span
    reason = f"{span}: {monitor.metric} breached on {', '.join(breached_by['features'])}"
    if window_result.reason:
        reason = f"{reason}; {window_result.reason}"
    return replace(
        window_result,
        breached=True,
        status="ok",
        breached_features=sorted(
            set(window_result.breached_features) | set(breached_by["features"])
        ),
        reason=reason,
        details=details,
    )


def _other_kinds():
    from driftgate.monitors.kinds.registry import KINDS

    return [k for k in KINDS if not isinstance(k, DriftKind)]


def is_drift(monitor) -> bool:
    from driftgate.monitors.kinds.registry import kind_of

    return isinstance(kind_of(monitor.metric), DriftKind)


def _decision_key(monitor, features: int) -> tuple:
    return (monitor.threshold, monitor.level(features), monitor.effect_size_floor)


def drift_tests_of(monitors: list) -> dict[str, float]:
    """Drift test name -> threshold to pass to ``check_drift`` for these monitors.

    Two monitors on the same test with different thresholds (or levels, or floors)
    cannot share one drift computation's decision; the caller runs one check per
    distinct decision (see :func:`group_by_threshold`).
    """
    return {m.metric: m.threshold for m in monitors if is_drift(m)}


def decision_options(monitors: list, all_features: Iterable[str]) -> dict:
    """``check_drift`` keyword arguments deciding these monitors (one group of
    :func:`group_by_threshold`): thresholds, per-test levels and effect-size floors."""
    all_features = list(all_features)
    drift = [m for m in monitors if is_drift(m)]
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


def group_by_threshold(monitors: list, all_features: Iterable[str] = ()) -> list[list]:
    """Split drift monitors into groups in which every test has a single decision
    (threshold, level, effect-size floor)."""
    all_features = list(all_features)
    groups: list[list] = []
    for monitor in monitors:
        if not is_drift(monitor):
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


def judge_report(monitor, drift_report) -> MonitorResult:
    """A drift monitor on a window's drift report: the worst of its features."""
    base = base_of(monitor)
    wanted = None if monitor.features == "all" else set(monitor.features)
    results = [
        r
        for r in drift_report.results
        if r.test == monitor.metric and (wanted is None or r.feature in wanted)
    ]
    if wanted is not None:
        unknown = wanted - {r.feature for r in results}
        if unknown:
            return error_result(
                monitor,
                f"features without a {monitor.metric} result: {', '.join(sorted(unknown))}",
            )
    if not results:
        return error_result(monitor, f"the drift report has no '{monitor.metric}' results")
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
        # The report says when a drift monitor is its bare threshold, not a budget; the
        # action's text, that the observed value is a p-value (it breaches below).
        details={
            **({} if monitor.calibrated else {"calibrated": False}),
            **({"observed": "p_value"} if evaluated[0].direction == "p_value" else {}),
            **effects_of(monitor.metric, [r for r in evaluated if r.feature in breached]),
        },
    )


# The breached features whose effect sizes a result carries (the worst first).
MAX_EFFECTS = 5


def effects_of(metric: str, results) -> dict:
    """``{"effects": {feature: {"effect_size", "effect", "moved"}}}`` of the breached
    features' results (largest effect first, at most ``MAX_EFFECTS``): how large each
    change is, named as the statistic names it (``StatTest.effect_label``: Cramér's V,
    D; None when the value shown is the effect itself), and, for a categorical feature,
    the levels that moved most. Empty when nothing breached."""
    from driftgate.monitors.stattests import get_stattest

    label = get_stattest(metric).effect_label
    sized = sorted(
        (r for r in results if r.effect_size is not None),
        key=lambda r: (-r.effect_size, r.feature),
    )[:MAX_EFFECTS]
    effects = {
        r.feature: {
            "effect_size": r.effect_size,
            "effect": label,
            "moved": r.details.get("moved", []),
        }
        for r in sized
    }
    return {"effects": effects} if effects else {}


def _largest(values) -> float | None:
    present = [float(v) for v in values if v is not None]
    return max(present) if present else None


register(DriftKind())
