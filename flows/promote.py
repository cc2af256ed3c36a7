"""Prefect flow ``validate-and-promote``: the promotion job's journey with its steps as tasks.

:func:`driftgate.jobs.promote.run_promotion` runs its steps (``evaluate-gates``,
``record-gate``, ``move-champion``) through the flows' step runner
(:mod:`driftgate.flows.steps`), the same function as ``driftgate promote``; the flow adds
the run history in the Prefect UI, a markdown artifact with the gate table, and, for a
retrain whose monitor says ``approval: required``, a person to ask: the run pauses with
a form (:func:`ask_in_prefect_ui`), and :func:`driftgate.jobs.retrain.decide_approval`
decides, as it does wherever a retrain runs.
"""

from __future__ import annotations

from prefect import flow, get_run_logger
from prefect.artifacts import create_markdown_artifact
from prefect.input import RunInput
from pydantic import Field

from driftgate.config import load_config
from driftgate.flows.person import ask_person
from driftgate.flows.steps import prefect_step
from driftgate.gates.config import load_gate_config
from driftgate.gates.result import GateResult
from driftgate.jobs import promote as job
from driftgate.jobs import retrain as retrain_job


def publish_gate(result: GateResult) -> None:
    """The recorded gate in the run's log and as a markdown artifact (the Prefect UI)."""
    get_run_logger().info(
        "gate for %s v%s:\n%s", result.model_name, result.candidate, result.table()
    )
    create_markdown_artifact(
        key=f"gate-{result.model_name}-v{result.candidate}".lower().replace("_", "-"),
        markdown=result.markdown(),
        description="driftgate promotion gate",
    )


class Approval(RunInput):
    """The form a person fills in the Prefect UI for a retrained candidate."""

    approve: bool = Field(False, description="promote the candidate to champion")
    reason: str = Field(min_length=1, description="why (recorded on the review and version)")
    by: str = Field(min_length=1, description="your name")


def ask_in_prefect_ui(brief: str, timeout_s: int) -> retrain_job.Answer | None:
    """Pause this flow run until a person approves or rejects the candidate (a form in
    the Prefect UI whose description is ``brief``: the drift evidence and the gate
    report), at most ``timeout_s``; None when nobody answered in time."""
    answer = ask_person(Approval.with_initial_data(description=brief, approve=False), timeout_s)
    if answer is None:
        return None
    return retrain_job.Answer(approve=answer.approve, by=answer.by, reason=answer.reason)


@flow(name="validate-and-promote")
def validate_and_promote(
    config_path: str | None = None,
    candidate: str | None = None,
    gates_path: str | None = None,
    retrain_id: str | None = None,
    wait_for_person: bool = True,
) -> dict:
    """Evaluate every gate on ``candidate`` (default: latest) and promote it if all pass.

    A failed gate is a completed flow run whose result says ``promoted: False`` (the
    gate did its job); registry errors fail the run. A retrain's candidate
    (``retrain_id``) is gated on the retrain's data version and approved as
    :func:`driftgate.jobs.retrain.decide_approval` says: with ``approval: required`` a
    candidate that passes waits for a person (:func:`ask_in_prefect_ui`) when
    ``wait_for_person`` (False in a drift check's subflow: nothing waits there).
    """
    config = load_config(config_path)
    approve = None
    if retrain_id is not None:  # scored on the data version the retrain trained on
        config = retrain_job.retrain_config(config, retrain_id)
        retrain = retrain_job.load_retrain(config, retrain_id)
        approve = retrain_job.approver(
            config, retrain, ask_in_prefect_ui if wait_for_person else None
        )
    gates = load_gate_config(gates_path or config.gates)
    outcome = job.run_promotion(
        config,
        gates,
        candidate,
        approve=approve,
        run_step=prefect_step,
        on_gate_recorded=publish_gate,
    )
    return outcome.summary()
