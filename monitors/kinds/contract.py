"""``contract:<rule kind>`` (and ``contract:any``): the window's data-contract result.

Breaches when more of the contract's rules of that kind fail than ``threshold`` (0: any);
it needs a contract, its features must be contract columns, and its rule kind one the
contract checks on them. No false-alarm budget: a failed rule is a fact, not a test.
"""

from __future__ import annotations

from driftgate.monitors.kinds.registry import (
    KindPlan,
    MonitorKind,
    WindowEvidence,
    base_of,
    error_result,
    register,
)
from driftgate.monitors.results import CONTRACT_PREFIX, MonitorResult

# Every kind of rule a contract makes (data_contracts.model.Contract.rules), and ``any``
# for all of them; tests/monitors/test_rules.py fails if the contract grows a new kind.
CONTRACT_RULE_KINDS = (
    "any", "row_count", "extra_columns", "exists", "dtype", "nulls", "range", "finite",
    "categories", "unique",
)  # fmt: skip


class ContractKind(MonitorKind):
    name = "contract"
    syntax = f"{CONTRACT_PREFIX}<rule kind>"

    def matches(self, metric: str) -> bool:
        return metric.startswith(CONTRACT_PREFIX)

    def validate_metric(self, metric: str) -> None:
        kind = metric.removeprefix(CONTRACT_PREFIX)
        if kind not in CONTRACT_RULE_KINDS:
            raise ValueError(
                f"unknown contract rule kind '{kind}' (known: {', '.join(CONTRACT_RULE_KINDS)})"
            )

    def level_tests(self, monitor, features: int) -> int | None:
        return None

    def check_against(self, monitor, features, contract) -> list[str]:
        listed = [] if monitor.features == "all" else list(monitor.features)
        if contract is None:
            return [f"metric {monitor.metric}: the project has no data contract"]
        columns = list(contract.columns)
        unknown = [f for f in listed if f not in columns]
        if unknown:
            return [
                f"features: not columns of contract '{contract.name}': "
                f"{', '.join(unknown)} (known: {', '.join(columns)})"
            ]
        kind = monitor.metric.removeprefix(CONTRACT_PREFIX)
        if kind == "any":
            return []
        checked = {r.kind for r in contract.rules() if not listed or r.column in listed}
        if kind not in checked:
            on = f" on {', '.join(listed)}" if listed else ""
            return [
                f"metric {monitor.metric}: contract '{contract.name}' checks no "
                f"'{kind}' rule{on} (it checks: {', '.join(sorted(checked))}), so it could "
                "never breach"
            ]
        return []

    def plan(self, monitor, profile, rows: int) -> KindPlan:
        return KindPlan(
            note=f"a failed contract rule is a fact, not a test: it breaches when more "
            f"than {monitor.threshold:g} rules fail, at any traffic; no level or "
            "false-alarm budget applies"
        )

    def evaluate(self, monitors, evidence: WindowEvidence) -> list[MonitorResult]:
        return [judge_contract(m, evidence.contract_result) for m in monitors]


def judge_contract(monitor, contract_result) -> MonitorResult:
    kind = monitor.metric.removeprefix(CONTRACT_PREFIX)
    if contract_result is None:
        return error_result(monitor, "no contract result for this window")
    if contract_result.row_count == 0:
        # An empty window (a paused service, a quiet hour) fails the row-count and
        # every column rule, yet says nothing about the data: no data, as every other
        # monitor says, not a breach that opens a review.
        return error_result(monitor, "no rows in the window", "no_data")
    failed = [
        r
        for r in contract_result.failures
        if (kind in ("any", r.kind)) and (monitor.features == "all" or r.column in monitor.features)
    ]
    columns = sorted({r.column for r in failed if r.column})
    return MonitorResult(
        **base_of(monitor),
        breached=len(failed) > monitor.threshold,
        observed=float(len(failed)),
        breached_features=columns,
        reason="; ".join(f"{r.rule}: {r.message}" for r in failed),
    )


register(ContractKind())
