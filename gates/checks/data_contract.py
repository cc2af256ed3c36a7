"""The reference period passes the configured data contract (Great Expectations).

Name: ``data_contract``. Group: data (before the metric gates). Tasks: all.
Needs: contract_result. Always on, no settings: without a configured contract it
passes and says so.
"""

from __future__ import annotations

from driftgate.gates.checks.registry import GateCheck, GateInputs, register
from driftgate.gates.result import CheckResult
from driftgate.training.features import TASKS


def check_data_contract(result) -> CheckResult:
    """``result``: the reference period's ``data_contracts.ContractResult``, or None."""
    if result is None:
        return CheckResult("data_contract", True, "no contract configured", "-", group="data")
    failed = [r.rule for r in result.failures]
    return CheckResult(
        "data_contract",
        result.passed,
        f"{len(result.rules) - len(failed)}/{len(result.rules)} rules pass",
        f"contract '{result.contract}' v{result.version}",
        "; ".join(f"{r.rule}: {r.message}" for r in result.failures),
        group="data",
        seconds=result.seconds,
    )


def _run(inputs: GateInputs, settings: None) -> CheckResult:
    return check_data_contract(inputs.contract_result)


register(
    GateCheck(
        name="data_contract",
        run=_run,
        applies_to=TASKS,
        settings=None,
        needs=("contract_result",),
        group="data",
        summary="the reference period passes the data contract",
    )
)
