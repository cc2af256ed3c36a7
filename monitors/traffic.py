"""Traffic monitors: what the service refused, how fast it answered, how often it failed.

Three monitor metrics that read the window's *traffic* rather than its feature values
(issue 16, items 1 and 5):

* ``rejected_share``: the share of received records the service refused (422), i.e.
  ``rejected / (accepted + rejected)``. With ``features: all`` the overall share, which
  counts the records the cap dropped too (``serving.rejected_max_per_minute``); with
  ``features: [f, ...]`` the share refused *on* each listed field (one test per field,
  Bonferroni over them); ``rejected_share:<rule kind>`` (``range``, ``dtype``,
  ``nulls``, ``categories``, ``feature`` for the model's own checks, ...) counts only
  refusals by that kind of rule. Per field and per rule, the counts are of stored
  records (the cap's overflow is counted per minute, not per field); the denominator
  is then the stored records.
* ``error_share``: the share of ``/predict`` requests answered 5xx.
* ``latency_p95``: the 95th percentile of ``/predict`` latency in seconds (the whole
  handler, as ``/metrics`` measures it).

**The decision is sample-size aware, one-sided and exact**, like ``missing_share``
(:mod:`monitors.nulls`): a share breaches when it is over the threshold AND
``P(Binomial(n, threshold) >= k) <= level``, the monitor's per-check level from its
false-alarm budget (:mod:`monitors.budget`); ``latency_p95`` breaches when the p95 is
over the threshold AND the count of requests slower than the threshold is improbable
when at most 5% are (``P(Binomial(n, 0.05) >= slow) <= level``). A window in which
even the most extreme outcome is not significant is ``insufficient_data``.

**The reference rejected share is 0.** The reference period passed the same contract
before the model was trained (a breach stops training, ``ContractBreach``), so a
contract record rule refuses none of it; the threshold is the tolerated base rate
(the rise over the reference), as for ``missing_share``. A project whose reference
does carry rejections (a contract tightened later) sets the threshold to that rate
plus the rise it tolerates. ``calibrated: false`` decides on the bare threshold.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

REJECTED_SHARE = "rejected_share"
TRAFFIC_METRICS = (REJECTED_SHARE, "error_share", "latency_p95")
# Kinds ``rejected_share:<kind>`` takes: every contract rule kind, and the model's own
# checks (``model.feature``: missing, not a number, not finite; ``model.extra_field``).
TRAFFIC_KINDS = (
    "exists", "dtype", "nulls", "range", "finite", "categories", "extra_columns",
    "feature", "extra_field",
)  # fmt: skip
# Under H0 "the p95 is at most the threshold", at most this share of requests is slower.
P95_TAIL = 0.05


def is_traffic_metric(metric: str) -> bool:
    """``rejected_share``, ``rejected_share:<kind>``, ``error_share``, ``latency_p95``."""
    return metric in TRAFFIC_METRICS or metric.startswith(f"{REJECTED_SHARE}:")


@dataclass(frozen=True)
class TrafficCounts:
    """A window's traffic, as the sample store counted it.

    ``accepted`` and ``rejected`` are stored records, ``overflow`` rejected records the
    cap counted but did not store; ``by_kind`` / ``by_field`` / ``by_field_kind``:
    stored rejected records per rule kind, field, and both. ``requests``, ``errors``
    (5xx) and ``latencies`` (seconds) come from the requests log.
    """

    accepted: int = 0
    rejected: int = 0
    overflow: int = 0
    by_kind: dict[str, int] = field(default_factory=dict)
    by_field: dict[str, int] = field(default_factory=dict)
    by_field_kind: dict[tuple[str, str], int] = field(default_factory=dict)
    requests: int = 0
    errors: int = 0
    latencies: np.ndarray = field(default_factory=lambda: np.empty(0))


@dataclass(frozen=True)
class ShareDecision:
    """One one-sided share test: ``k`` of ``n`` against ``bound``."""

    observed: float | None
    breached: bool
    p_value: float | None
    insufficient: bool
    min_detectable: float | None


def share_decision(k: int, n: int, bound: float, threshold: float, level: float | None):
    """Breach when ``value > threshold`` and (calibrated) ``P(Bin(n, bound) >= k) <= level``.

    ``value`` is ``k / n`` for the shares; the caller passes ``bound = threshold``.
    """
    from scipy import stats  # imported when used (issue 32)

    if n <= 0:
        return ShareDecision(None, False, None, False, None)
    observed = k / n
    if level is None:
        return ShareDecision(observed, observed > threshold, None, False, None)
    if bound >= 1:
        return ShareDecision(observed, False, 1.0, True, math.inf)
    p_value = float(stats.binom.sf(k - 1, n, bound)) if k > 0 else 1.0
    insufficient = bound**n > level  # even k = n is not significant
    critical = int(stats.binom.isf(level, n, bound)) + 1 if bound > 0 else 1
    min_detectable = max(critical / n, threshold) if not insufficient else math.inf
    return ShareDecision(
        observed, observed > threshold and p_value <= level, p_value, insufficient, min_detectable
    )


def evaluate_traffic(monitor, traffic: TrafficCounts | None, base: dict):
    """A traffic monitor on one window (a :class:`monitors.rules.MonitorResult`)."""
    from driftgate.monitors.results import MonitorResult

    if traffic is None:
        return MonitorResult(
            **base, breached=False, observed=None, status="error",
            reason=f"{monitor.metric} needs the sample store's traffic counts (rejected "
            "records, requests log); this window was read from files",
        )  # fmt: skip
    metric = monitor.metric
    if metric == "latency_p95":
        return _latency(monitor, traffic, base)
    if metric == "error_share":
        decision = share_decision(
            traffic.errors, traffic.requests, monitor.threshold, monitor.threshold,
            monitor.level(1),
        )  # fmt: skip
        return _result(monitor, base, decision, [], f"{traffic.errors} of {traffic.requests} "
                       "requests answered 5xx")  # fmt: skip
    kind = metric.partition(":")[2] or None
    stored = traffic.accepted + traffic.rejected
    if monitor.features == "all":
        if kind is None:
            k, n = traffic.rejected + traffic.overflow, stored + traffic.overflow
        else:
            k, n = traffic.by_kind.get(kind, 0), stored
        decision = share_decision(k, n, monitor.threshold, monitor.threshold, monitor.level(1))
        overflow = f" ({traffic.overflow} over the cap, counted)" if traffic.overflow else ""
        return _result(monitor, base, decision, [],
                       f"{k} of {n} records refused{overflow}")  # fmt: skip
    level = monitor.level(len(monitor.features))
    decisions = {}
    for name in monitor.features:
        k = (
            traffic.by_field.get(name, 0)
            if kind is None
            else traffic.by_field_kind.get((name, kind), 0)
        )
        decisions[name] = share_decision(k, stored, monitor.threshold, monitor.threshold, level)
    evaluated = {f: d for f, d in decisions.items() if d.observed is not None}
    if not evaluated:
        return _result(monitor, base, ShareDecision(None, False, None, False, None), [], "")
    worst = max(evaluated, key=lambda f: evaluated[f].observed)
    breached = sorted(f for f, d in evaluated.items() if d.breached)
    combined = ShareDecision(
        observed=evaluated[worst].observed,
        breached=bool(breached),
        p_value=min((d.p_value for d in evaluated.values() if d.p_value is not None),
                    default=None),
        insufficient=all(d.insufficient for d in evaluated.values()),
        min_detectable=evaluated[worst].min_detectable,
    )  # fmt: skip
    detail = ", ".join(f"{f}: {evaluated[f].observed:.3g}" for f in evaluated)
    return _result(monitor, base, combined, breached, f"refused share per field: {detail}",
                   level=level)  # fmt: skip


def _latency(monitor, traffic: TrafficCounts, base: dict):
    latencies = np.asarray(traffic.latencies, dtype=float)
    n = latencies.size
    if n == 0:
        return _result(monitor, base, ShareDecision(None, False, None, False, None), [], "")
    p95 = float(np.quantile(latencies, 0.95))
    slow = int((latencies > monitor.threshold).sum())
    level = monitor.level(1)
    share = share_decision(slow, n, P95_TAIL, P95_TAIL, level)
    decision = ShareDecision(
        observed=p95,
        breached=p95 > monitor.threshold and (level is None or share.breached),
        p_value=share.p_value,
        insufficient=share.insufficient,
        min_detectable=None,
    )
    return _result(monitor, base, decision, [], f"p95 {p95:.3g} s over {n} requests; {slow} "
                   f"slower than {monitor.threshold:g} s")  # fmt: skip


def _result(monitor, base, decision: ShareDecision, breached_features, detail, level=None):
    from driftgate.monitors.results import MonitorResult

    level = monitor.level(1) if level is None else level
    if decision.observed is None:
        return MonitorResult(**base, breached=False, observed=None, status="no_data",
                             reason="no traffic in the window", level=level)  # fmt: skip
    if decision.insufficient and not decision.breached:
        return MonitorResult(
            **base, breached=False, observed=decision.observed, status="insufficient_data",
            reason=f"too few records for any outcome to be significant at {level:.3g}; {detail}",
            p_value=decision.p_value, level=level, min_detectable=decision.min_detectable,
        )  # fmt: skip
    return MonitorResult(
        **base,
        breached=decision.breached,
        observed=float(decision.observed),
        breached_features=list(breached_features),
        reason=detail,
        p_value=decision.p_value,
        level=level,
        min_detectable=decision.min_detectable,
    )
