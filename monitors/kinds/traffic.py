"""Traffic: ``rejected_share`` (``:<rule kind>``), ``error_share``, ``latency_p95``,
judged on the window's request counts (:mod:`monitors.traffic`)."""

from __future__ import annotations

from driftgate.monitors.kinds.registry import (
    KindPlan,
    MonitorKind,
    WindowEvidence,
    base_of,
    register,
    uncalibrated_note,
)
from driftgate.monitors.traffic import (
    REJECTED_SHARE,
    TRAFFIC_KINDS,
    evaluate_traffic,
    is_traffic_metric,
)


class TrafficKind(MonitorKind):
    name = "traffic"
    syntax = "rejected_share, rejected_share:<rule kind>, error_share, latency_p95"

    def matches(self, metric: str) -> bool:
        return is_traffic_metric(metric)

    def validate_metric(self, metric: str) -> None:
        kind = metric.partition(":")[2]
        if kind and kind not in TRAFFIC_KINDS:
            raise ValueError(
                f"unknown rule kind '{kind}' for {REJECTED_SHARE} (known: "
                f"{', '.join(TRAFFIC_KINDS)})"
            )

    def check_against(self, monitor, features, contract) -> list[str]:
        listed = [] if monitor.features == "all" else list(monitor.features)
        fields = list(features) + (list(contract.columns) if contract is not None else [])
        if listed and not monitor.metric.startswith(REJECTED_SHARE):
            return [f"features: {monitor.metric} is per request; use all"]
        if unknown := [f for f in listed if f not in fields]:
            return [
                f"features: not fields of the model or contract: {', '.join(unknown)} "
                f"(known: {', '.join(dict.fromkeys(fields))})"
            ]
        return []

    def plan(self, monitor, profile, rows: int) -> KindPlan:
        from driftgate.monitors.traffic import share_decision

        tests = 1 if monitor.features == "all" else len(monitor.features)
        level = monitor.level(tests)
        if not monitor.metric.startswith(REJECTED_SHARE):
            counted = "requests" if monitor.metric == "error_share" else "request latencies"
            return KindPlan(
                level=level,
                tests=tests,
                note=uncalibrated_note(monitor)
                or f"flags >= needs the {counted} per window, which the plan does not "
                "know (rows per window count records, a request may hold many)",
            )
        # The records a window receives: its rows (the accepted ones) at the least.
        decision = share_decision(0, rows, monitor.threshold, monitor.threshold, level)
        return KindPlan(
            level=level,
            tests=tests,
            min_detectable=decision.min_detectable,
            units="share of received records",
            note=uncalibrated_note(monitor),
        )

    def evaluate(self, monitors, evidence: WindowEvidence):
        return [evaluate_traffic(m, evidence.traffic, base_of(m)) for m in monitors]


register(TrafficKind())
