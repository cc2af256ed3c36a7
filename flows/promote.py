"""Prefect flow ``validate_and_promote``: the promotion job's steps as tasks.

Same functions as ``driftgate promote``; the flow adds the run history in the Prefect
UI and a markdown artifact with the gate table.
"""

from __future__ import annotations

from prefect import flow, get_run_logger, task
from prefect.artifacts import create_markdown_artifact
from prefect.cache_policies import NO_CACHE
from prefect.exceptions import FlowPauseTimeout
from prefect.flow_runs import pause_flow_run
from prefect.input import RunInput
from pydantic import Field

from driftgate.config import ProjectConfig, load_config
from driftgate.core.errors import DriftgateError
from driftgate.gates.config import load_gate_config
from driftgate.gates.result import GateResult
from driftgate.jobs import promote as job
from driftgate.jobs import retrain as retrain_job


@task(name="evaluate-gates", cache_policy=NO_CACHE)
def evaluate_gates_task(config: ProjectConfig, gates, candidate: str | None) -> GateResult:
    return job.evaluate_gates(config, gates, candidate)


@task(name="record-gate", cache_policy=NO_CACHE)
def record_gate_task(config: ProjectConfig, result: GateResult) -> dict:
    folder = config.home_dir / "reports" / f"promote-{result.model_name}-v{result.candidate}"
    files = result.write(folder)
    job.record_gate(config, result, files)
    create_markdown_artifact(
        key=f"gate-{result.model_name}-v{result.candidate}".lower().replace("_", "-"),
        markdown=result.markdown(),
        description="driftgate promotion gate",
    )
    return {kind: str(path) for kind, path in files.items()}


@task(name="move-champion", cache_policy=NO_CACHE)
def promote_task(config: ProjectConfig, result: GateResult) -> str | None:
    return job.promote(config, result)


class Approval(RunInput):
    """The form a person fills in the Prefect UI for a retrained candidate."""

    approve: bool = Field(False, description="promote the candidate to champion")
    reason: str = Field(min_length=1, description="why (recorded on the review and version)")
    by: str = Field(min_length=1, description="your name")


class ApprovalTimeout(DriftgateError, RuntimeError):
    """Nobody approved or rejected a candidate in time: it is not promoted."""


def wait_for_approval(
    config: ProjectConfig, result: GateResult, retrain_id: str, timeout_s: int
) -> Approval:
    """Pause this flow run until a person approves or rejects the candidate (a form in
    the Prefect UI with the drift evidence and the gate report), at most ``timeout_s``;
    the decision, or the timeout, is recorded on the retrain, its review and the version."""
    brief = retrain_job.approval_brief(config, retrain_id, result.markdown())
    try:
        answer = pause_flow_run(
            wait_for_input=Approval.with_initial_data(description=brief, approve=False),
            timeout=timeout_s,
        )
    except FlowPauseTimeout:
        reason = f"no decision within {timeout_s} s"
        retrain_job.record_decision(
            config, retrain_id, result.candidate, decision="timed out", by="-", reason=reason
        )
        raise ApprovalTimeout(
            f"{result.model_name} v{result.candidate} passed the gate; {reason}: not promoted"
        ) from None
    decision = "approved" if answer.approve else "rejected"
    retrain_job.record_decision(
        config, retrain_id, result.candidate, decision=decision, by=answer.by, reason=answer.reason
    )
    return answer


@flow(name="validate-and-promote")
def validate_and_promote(
    config_path: str | None = None,
    candidate: str | None = None,
    gates_path: str | None = None,
    retrain_id: str | None = None,
    approval_timeout_s: int | None = None,
) -> dict:
    """Evaluate every gate on ``candidate`` (default: latest) and promote it if all pass.

    A failed gate is a completed flow run whose result says ``promoted: False`` (the
    gate did its job); registry errors fail the run. With ``approval_timeout_s`` (a
    retrain whose monitor says ``approval: required``), a candidate that passes waits
    for a person (:func:`wait_for_approval`) and is promoted only if approved.
    """
    logger = get_run_logger()
    config = load_config(config_path)
    if retrain_id is not None:  # scored on the data version the retrain trained on
        config = retrain_job.retrain_config(config, retrain_id)
    gates = load_gate_config(gates_path or config.gates)
    result = evaluate_gates_task(config, gates, candidate)
    logger.info("gate for %s v%s:\n%s", result.model_name, result.candidate, result.table())
    files = record_gate_task(config, result)
    promote = result.passed
    decision = None
    if promote and approval_timeout_s is not None and retrain_id is not None:
        answer = wait_for_approval(config, result, retrain_id, approval_timeout_s)
        promote, decision = answer.approve, "approved" if answer.approve else "rejected"
    previous = promote_task(config, result) if promote else None
    return {
        "model_name": result.model_name,
        "candidate": result.candidate,
        "champion_before": result.champion,
        "passed": result.passed,
        "promoted": promote,
        "decision": decision,
        "previous_champion": previous,
        "failed_checks": [c.name for c in result.failures],
        "reports": files,
    }
