"""Prefect flow ``revise-contract``: a person accepts or declines the contract revision
that a review of refused traffic proposes, in a form of the Prefect UI.

The same three steps as ``driftgate contract revise --from-review ID``
(:mod:`driftgate.jobs.contract_revision`): the proposal is built again from the review's
latest window against the contract in effect now, shown (the run's log, a markdown
artifact, and the form's description: the diff, one line per changed key), and written
only when the person ticks *accept* (:func:`~driftgate.jobs.contract_revision.accept_revision`:
a new contract file, the champion tagged, the review resolved). A decline, or no answer
within ``timeout_s``, changes no contract and says so on the review.

``driftgate deploy`` registers it as ``revise-contract/<model>`` (no schedule); the
drift-check flow starts a run of it for each review that a window's refused traffic
opens with a proposal (:func:`ask_for_review`), where that deployment exists.
"""

from __future__ import annotations

from prefect import flow, get_run_logger
from prefect.artifacts import create_markdown_artifact
from prefect.input import RunInput
from pydantic import Field

from driftgate.config import ProjectConfig, load_config
from driftgate.flows.person import ask_person
from driftgate.jobs import contract_revision as job

DEFAULT_TIMEOUT_S = 7 * 24 * 3600  # a person has a week; the proposal can be shown again


class ContractDecision(RunInput):
    """The form a person fills in the Prefect UI for a proposed contract revision."""

    accept: bool = Field(False, description="write the revised contract (a new version file)")
    reason: str = Field(min_length=1, description="why (recorded on the review)")
    by: str = Field(min_length=1, description="your name")


def brief(review_id: str, lines: list[str], service: str) -> str:
    """The form's description and the run's artifact: the review, the diff, and what
    accepting does (``service``: what the running service then does)."""
    head, *diff = lines
    return "\n".join(
        [
            f"**Review {review_id}**: {head}",
            "",
            "```",
            *(line.strip() for line in diff),
            "```",
            "",
            "Accepting writes the next contract version beside the current one, tags the "
            f"champion with it and resolves the review; {service}. Declining changes nothing.",
        ]
    )


@flow(name="revise-contract")
def revise_contract(
    review_id: str,
    config_path: str | None = None,
    timeout_s: int = DEFAULT_TIMEOUT_S,
) -> dict:
    """Show the revision review ``review_id`` proposes and wait up to ``timeout_s`` for a
    person to accept or decline it (the module doc). Returns what happened."""
    logger = get_run_logger()
    config = load_config(config_path)
    _, revision = job.propose_for_review(config, review_id)
    lines = revision.diff_lines()
    if not revision.changed:
        logger.info("review %s: %s", review_id, lines[0])
        return {"review_id": review_id, "decision": "nothing to revise", "detail": lines[0]}
    text = brief(review_id, lines, job.service_note(config))
    logger.info("review %s proposes:\n%s", review_id, "\n".join(lines))
    create_markdown_artifact(
        key=f"contract-revision-{review_id}".lower()[:100],
        markdown=text,
        description="driftgate contract revision",
    )
    answer = ask_person(
        ContractDecision.with_initial_data(description=text, accept=False), timeout_s
    )
    if answer is None:
        job.record_declined(config, review_id, by=None, reason=f"no answer within {timeout_s} s")
        return {"review_id": review_id, "decision": "no answer"}
    if not answer.accept:
        job.record_declined(config, review_id, by=answer.by, reason=answer.reason)
        return {"review_id": review_id, "decision": "declined", "by": answer.by}
    try:
        accepted = job.accept_revision(
            config, review_id, by=answer.by, reason=answer.reason, shown=lines
        )
    except job.RevisionError as exc:  # e.g. the review took a window while the form waited
        job.note_on_review(
            config, review_id, f"contract revision accepted by {answer.by}, not written: {exc}"
        )
        return {"review_id": review_id, "decision": "not written", "detail": str(exc)}
    return {
        "review_id": review_id,
        "decision": "accepted",
        "by": answer.by,
        "contract": str(accepted.path),
        "version": accepted.revision.revised.version,
        "champion": accepted.champion,
    }


def contract_deployment(config: ProjectConfig) -> str:
    """The deployment ``driftgate deploy`` registers for revising this model's contract."""
    return f"revise-contract/{config.model.name}"


def ask_for_review(config: ProjectConfig, review_id: str) -> str:
    """Start a ``revise-contract`` run for review ``review_id`` where the deployment
    exists, unless one is already waiting for it (one question per review at a time: the
    review is updated, and proposes again, on every window the refusals go on). Returns
    at once, saying what was done; without a Prefect server or that deployment the CLI
    is the way and nothing is started."""
    from driftgate.flows.deployments import prefect_api_url
    from driftgate.flows.retrain import deployment_exists

    name = contract_deployment(config)
    command = f"driftgate contract revise --from-review {review_id}"
    if prefect_api_url() is None or not deployment_exists(name):
        return f"no {name} deployment: a person accepts it with `{command}`"
    tag = f"review:{review_id}"
    if waiting := _unfinished_runs(tag):
        return f"already asked in the Prefect UI: flow run {waiting[0].id} of {name}"
    from prefect.deployments import run_deployment

    flow_run = run_deployment(
        name,
        parameters={"review_id": review_id},
        timeout=0,  # do not wait: the run waits for the person
        tags=["driftgate", "contract-revision", tag],
    )
    return f"asked in the Prefect UI: flow run {flow_run.id} of {name} (or `{command}`)"


def _unfinished_runs(tag: str) -> list:
    """Flow runs tagged ``tag`` that have not ended (scheduled, running or paused)."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import (
        FlowRunFilter,
        FlowRunFilterState,
        FlowRunFilterStateType,
        FlowRunFilterTags,
    )
    from prefect.client.schemas.objects import StateType

    unfinished = [StateType.SCHEDULED, StateType.PENDING, StateType.RUNNING, StateType.PAUSED]
    runs = FlowRunFilter(
        tags=FlowRunFilterTags(all_=[tag]),
        state=FlowRunFilterState(type=FlowRunFilterStateType(any_=unfinished)),
    )
    with get_client(sync_client=True) as client:
        return client.read_flow_runs(flow_run_filter=runs)
