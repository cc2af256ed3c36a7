"""Traffic: ``rejected_share`` (``:<rule kind>``), ``error_share``, ``latency_p95``,
judged on the window's request counts (:mod:`monitors.traffic`)."""

from __future__ import annotations

from driftgate.monitors.kinds.registry import MonitorKind, WindowEvidence, base_of, register
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

    def evaluate(self, monitors, evidence: WindowEvidence):
        return [evaluate_traffic(m, evidence.traffic, base_of(m)) for m in monitors]


register(TrafficKind())
