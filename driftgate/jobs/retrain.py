"""The retrain job: what the ``retrain`` monitor action starts, and its outcome.

:func:`start_retrain` is the action's retrain port (``ActionPorts.retrain``), handed
over by the drift check's ``act`` step. It claims the model's retrain slot in the
retrain store (:mod:`driftgate.stores.retrains`: one retrain per breach, at most one in
flight per model, a lease that expires), then hands the claimed retrain to a
*launcher*, which chooses where the one retrain journey, :func:`run_retrain`, runs:

- :func:`run_locally` (the default, and the fallback): in this process, synchronously,
  inside the drift check, with no Prefect;
- ``driftgate.flows.retrain.launch`` (what the drift-check flow and the CLI hand over):
  a run of the ``train/<model>`` deployment when a Prefect server has one registered
  (``driftgate deploy``), without waiting for it; else a ``train`` subflow inside a flow
  run; else :func:`run_locally`. The train flow runs :func:`run_retrain` with its
  steps as tasks.

Wherever it runs, :func:`run_retrain` is the same steps, and :func:`decide_approval` the
same rule for ``approval: required``: a person decides where one can be waited for (a
deployment's run, paused), and nowhere else is the candidate promoted without one.

The data (:mod:`driftgate.jobs.retrain_data`): the project's configured data, exactly
as ``driftgate train`` reads it, with the breaching window's labelled records added to
each split, written once per retrain as a prepared-data folder. Training and the gate
both read that folder (:func:`retrain_config`), so the gate scores the candidate and
the champion on the same held-out rows, the window's newest among them, and its
``data_version`` check holds.

The outcome is recorded on the retrain row, on the review (its evidence gains the
candidate's MLflow run, the gate report and a line saying what happened) and on the
candidate model version (tags ``driftgate.retrain.*``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from driftgate import registry
from driftgate.config import ProjectConfig
from driftgate.core.errors import DriftgateError
from driftgate.core.redaction import redact_credentials
from driftgate.gates.result import GateResult
from driftgate.jobs.retrain_data import retrain_data, save_data_settings
from driftgate.jobs.steps import StepRunner, call_step
from driftgate.monitors.actions import ActionRequest, RetrainStart
from driftgate.monitors.rules import RetrainSettings
from driftgate.stores.factories import retrain_store, review_store
from driftgate.stores.retrains import IN_FLIGHT, Claim, Retrain
from driftgate.stores.samples import to_utc

if TYPE_CHECKING:
    from driftgate.jobs.promote import Approval, Approve
    from driftgate.jobs.train import TrainingOutcome
    from driftgate.training.train import EpochRecord

log = logging.getLogger(__name__)

LOCAL, PREFECT = "local", "prefect"
TAG_RETRAIN = "driftgate.retrain"
# Where a retrain fails, besides the training job's own steps (``jobs.train.STEPS``:
# prepare-data, where the contract is checked, fit-model, evaluate-model,
# register-model): building its data version, the gate, starting it somewhere.
DATA_STEP, GATE_STEP, LAUNCH_STEP = "retrain-data", "gate", "launch"
# A failure's line on the retrain and the review is cut to this many characters.
FAILURE_LINE_CHARS = 2000


def failure_line(step: str, exc: BaseException) -> str:
    """The one line a failed retrain leaves on its record, its review and the log: the
    step, the error's type and its message with its lines joined (a contract breach
    lists one rule a line), never a traceback."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    line = f"{step} failed: {type(exc).__name__}: {'; '.join(lines) or '(no message)'}"
    line = redact_credentials(line)
    if len(line) > FAILURE_LINE_CHARS:
        line = line[: FAILURE_LINE_CHARS - 1] + "…"
    return line


# (config, claimed retrain) -> the retrain as it stands after launching: finished when
# it ran in process, in flight with its flow run id when a deployment runs it.
Launcher = Callable[[ProjectConfig, Retrain], Retrain]


def links(retrain: Retrain) -> list[str]:
    """Where to look: the retrain, its Prefect flow run, its MLflow run, its gate report."""
    found = [f"retrain:{retrain.id}"]
    if retrain.flow_run_id:
        found.append(f"prefect:flow-run/{retrain.flow_run_id}")
    if retrain.run_id:
        found.append(f"runs:/{retrain.run_id}")
    if retrain.gate_report:
        found.append(retrain.gate_report)
    return found


def start_retrain(
    config: ProjectConfig,
    request: ActionRequest,
    review_id: str | None,
    settings: RetrainSettings | None = None,
    launcher: Launcher | None = None,
) -> RetrainStart:
    """Start train -> gate for the breach in ``request`` unless one is in flight for the
    model, this breach asked before or the last retrain is within the cooldown; links
    the review to what it started or found. A retrain that fails says so in one line
    on its record and the review (:func:`failure_line`); the drift check goes on."""
    settings = settings or RetrainSettings()
    claim = claim_retrain(config, request, review_id, settings)
    if not claim.started:
        found = claim.retrain
        _add_evidence(config, review_id, links(found))
        why = "no new retrain"
        if (
            settings.cooldown_words()  # a cooldown is set
            and found.status != IN_FLIGHT
            and to_utc(found.window[0]) != to_utc(request.start)  # not this breach's own
        ):
            why += (
                f" (retrain.cooldown {settings.cooldown_words()} of event time after the "
                f"window of the last one, ending {found.window[1]})"
            )
        return RetrainStart(False, f"{why}: {found.outcome}", links(found))
    try:
        # Before launching: whoever builds the data reads them.
        save_data_settings(config, claim.retrain.id, settings.data)
        retrain = (launcher or run_locally)(config, claim.retrain)
    except Exception as exc:  # the drift check goes on: its evidence and review stand
        retrain = load_retrain(config, claim.retrain.id)
        if retrain.status == IN_FLIGHT:  # else run_retrain recorded how it ended
            retrain = fail_retrain(config, retrain.id, failure_line(LAUNCH_STEP, exc))
        log.error("retrain %s: %s", retrain.id, retrain.detail)
        log.debug("retrain %s", retrain.id, exc_info=exc)
    _add_evidence(config, review_id, links(retrain))
    return RetrainStart(True, f"started {retrain.outcome}", links(retrain))


def claim_retrain(
    config: ProjectConfig,
    request: ActionRequest,
    review_id: str | None,
    settings: RetrainSettings,
) -> Claim:
    """The claim step: take the model's retrain slot for this breach, or find who holds
    it (:meth:`driftgate.stores.retrains.RetrainStore.claim`). The cooldown is event
    time, the breaching window's end against the last retrain's window end, counted
    in days and in this monitor's windows (:meth:`RetrainSettings.cooldown_span`); the
    lease is wall-clock time from now."""
    store = retrain_store(config)
    try:
        return store.claim(
            model_name=request.model_name,
            champion_version=request.model_version,
            monitor=request.result.monitor,
            window_start=request.start,
            window_end=request.end,
            review_id=review_id,
            lease=settings.lease_length.to_pytimedelta(),
            approval_timeout_s=settings.approval_seconds,
            cooldown=settings.cooldown_span((request.end - request.start).to_pytimedelta()),
        )
    finally:
        store.close()


def mark_launched(
    config: ProjectConfig, retrain: Retrain, launcher: str, flow_run_id: str | None = None
) -> Retrain:
    store = retrain_store(config)
    try:
        store.launched(retrain.id, launcher=launcher, flow_run_id=flow_run_id)
        return store.get(retrain.id)
    finally:
        store.close()


# (the config the retrain is gated with, the retrain, its candidate version) -> the
# promotion's summary (:meth:`driftgate.jobs.promote.PromotionOutcome.summary`): the gate
# in process (:func:`gate_in_process`), or the ``validate-and-promote`` subflow.
Gate = Callable[[ProjectConfig, Retrain, str], dict]


@dataclass(frozen=True)
class RetrainRun:
    """A retrain that ended with a gated candidate: as recorded, its training, its gate."""

    retrain: Retrain
    training: TrainingOutcome
    gate: dict


def run_retrain(
    config: ProjectConfig,
    retrain_id: str,
    *,
    run_step: StepRunner = call_step,
    on_epoch: Callable[[EpochRecord], None] | None = None,
    gate: Gate | None = None,
) -> RetrainRun:
    """The retrain journey, the same wherever it runs (in process, a subflow of the
    drift check, a deployment's run): its data version (:mod:`.retrain_data`), the
    training journey on it, the gate on it, then approval (:func:`decide_approval`)
    and the outcome. ``run_step`` runs the training steps (here, or as Prefect tasks);
    ``gate``: where the gate runs (default: :func:`gate_in_process`). A failure, in any
    step (its data, the contract, training, registering, the gate), is recorded as one
    line naming the step (:func:`failure_line`) on the retrain and its review (the
    model's slot freed), then raised as it came (a train flow's run fails with it).
    ``on_epoch``: default, the training job's log line per epoch."""
    # Imported here, as in the functions below: the drift check imports this module for
    # its retrain port, and must not load torch (training, the gate) until it retrains.
    from driftgate.jobs.train import log_epoch, run_training

    retrain = load_retrain(config, retrain_id)
    step = DATA_STEP

    def named_step(name: str, fn, /, *args, **kwargs):
        nonlocal step
        step = name  # the training step that fails names the failure
        return run_step(name, fn, *args, **kwargs)

    try:
        data = retrain_data(config, retrain.id, retrain.window)
        log.info("retrain %s: training %s; %s", retrain.id, config.model.name, data.summary)
        training = run_training(data.config, on_epoch=on_epoch or log_epoch, run_step=named_step)
        registered = training.registered
        step = GATE_STEP
        gated = (gate or gate_in_process)(data.config, retrain, registered.version)
    except Exception as exc:
        fail_retrain(config, retrain_id, failure_line(step, exc))
        log.debug("retrain %s", retrain_id, exc_info=exc)  # the traceback, for debugging
        raise
    retrain = record_outcome(
        config,
        retrain_id,
        run_id=registered.run_id,
        candidate=registered.version,
        passed=gated["passed"],
        promoted=gated["promoted"],
        gate_report=gate_report_of(registered.run_id, gated["reports"]),
        detail="; ".join(part for part in (data.summary, gated.get("note")) if part),
    )
    return RetrainRun(retrain, training, gated)


def gate_in_process(config: ProjectConfig, retrain: Retrain, candidate: str) -> dict:
    """The promotion job on ``candidate`` here; nobody can be asked to approve it."""
    from driftgate.gates.config import load_gate_config
    from driftgate.jobs.promote import run_promotion

    outcome = run_promotion(
        config,
        load_gate_config(config.gates),
        candidate,
        approve=approver(config, retrain, ask=None),
    )
    return outcome.summary()


def run_locally(config: ProjectConfig, retrain: Retrain) -> Retrain:
    """The launcher that runs :func:`run_retrain` in this process (no Prefect); returns
    the finished retrain, failed or not (:func:`run_retrain` recorded the failure)."""
    mark_launched(config, retrain, LOCAL)
    try:
        return run_retrain(config, retrain.id).retrain
    except Exception:  # the drift check goes on: its evidence and review stand
        failed = load_retrain(config, retrain.id)  # run_retrain recorded its one line
        log.error("retrain %s: %s", retrain.id, failed.detail)
        return failed


@dataclass(frozen=True)
class Answer:
    """What a person said of a retrained candidate."""

    approve: bool
    by: str
    reason: str


# (what the person reads, how long to wait, in seconds) -> their answer, or None when
# nobody answered in time. Only a run that may wait has one (a Prefect flow run of its
# own, paused: ``driftgate.flows.promote.ask_in_prefect_ui``).
AskPerson = Callable[[str, int], Answer | None]


class ApprovalTimeout(DriftgateError, RuntimeError):
    """Nobody approved or rejected a candidate in time: it is not promoted."""


def decide_approval(
    config: ProjectConfig, retrain: Retrain, result: GateResult, ask: AskPerson | None
) -> Approval:
    """Whether a retrained candidate that passed the gate replaces the champion: the one
    rule, wherever the retrain runs.

    - ``approval: none``: the gate decided; promote.
    - ``approval: required``, and a person can be asked (``ask``: a train flow run of
      its own, a deployment's): their answer, recorded on the retrain, its review and
      the version; nobody within ``approval_timeout``: ``timed out`` is recorded the same
      way and :class:`ApprovalTimeout` raised (the retrain fails, its slot freed).
    - ``approval: required``, and nobody can be asked (in process, or a subflow of a
      drift check, which must not wait for a person): not promoted; the outcome says
      how a person promotes it.
    """
    from driftgate.jobs.promote import Approval

    timeout_s, candidate = retrain.approval_timeout_s, result.candidate
    if timeout_s is None:
        return Approval(promote=True)
    if ask is None:
        return Approval(
            promote=False,
            note=(
                "approval required: a person promotes it with `driftgate promote "
                f"--candidate {candidate}`"
            ),
        )
    answer = ask(approval_brief(config, retrain.id, result.markdown()), timeout_s)
    if answer is None:
        reason = f"no decision within {timeout_s} s"
        record_decision(config, retrain.id, candidate, decision="timed out", by="-", reason=reason)
        raise ApprovalTimeout(
            f"{result.model_name} v{candidate} passed the gate; {reason}: not promoted"
        )
    decision = "approved" if answer.approve else "rejected"
    record_decision(
        config, retrain.id, candidate, decision=decision, by=answer.by, reason=answer.reason
    )
    return Approval(promote=answer.approve, decision=decision)


def approver(config: ProjectConfig, retrain: Retrain, ask: AskPerson | None) -> Approve:
    """:func:`decide_approval` for ``retrain``, as the promotion job's ``approve``."""
    return lambda result: decide_approval(config, retrain, result, ask)


def load_retrain(config: ProjectConfig, retrain_id: str) -> Retrain:
    store = retrain_store(config)
    try:
        return store.get(retrain_id)
    finally:
        store.close()


def retrain_config(config: ProjectConfig, retrain_id: str) -> ProjectConfig:
    """The config retrain ``retrain_id`` trains and is gated with: its data version
    (the configured data plus the window's labelled records), built on first use."""
    retrain = load_retrain(config, retrain_id)
    return retrain_data(config, retrain.id, retrain.window).config


def record_outcome(
    config: ProjectConfig,
    retrain_id: str,
    *,
    run_id: str,
    candidate: str,
    passed: bool,
    promoted: bool,
    gate_report: str,
    detail: str | None = None,
) -> Retrain:
    """The retrain ended with a gated candidate: on its row (freeing the model's slot),
    on the review and on the candidate version."""
    store = retrain_store(config)
    try:
        retrain = store.finish(
            retrain_id,
            run_id=run_id,
            candidate_version=candidate,
            passed=passed,
            promoted=promoted,
            gate_report=gate_report,
            detail=detail,
        )
    finally:
        store.close()
    _add_evidence(config, retrain.review_id, [*links(retrain), retrain.outcome])
    tags = {
        f"{TAG_RETRAIN}.id": retrain.id,
        f"{TAG_RETRAIN}.review": retrain.review_id or "-",
        f"{TAG_RETRAIN}.monitor": retrain.monitor,
        f"{TAG_RETRAIN}.window": "..".join(retrain.window),
        f"{TAG_RETRAIN}.champion_before": retrain.champion_version,
    }
    try:
        registry.tag_model_version(config.tracking, config.model.name, candidate, tags)
    except Exception as exc:  # the outcome stands: the gate judged and recorded it
        line = f"candidate v{candidate}: {failure_line('tag-version', exc)}"
        _add_evidence(config, retrain.review_id, [line])
        log.error("retrain %s: %s", retrain.id, line)
    log.info("%s", retrain.outcome)
    return retrain


def approval_brief(config: ProjectConfig, retrain_id: str, gate_markdown: str) -> str:
    """What the person approving a candidate reads: the breach and its drift evidence
    (the review), then the gate report."""
    store, reviews = retrain_store(config), review_store(config)
    try:
        retrain = store.get(retrain_id)
        review = reviews.get(retrain.review_id) if retrain.review_id else None
    finally:
        store.close()
        reviews.close()
    lines = [
        f"# Approve the retrained {config.model.name}?",
        "",
        f"Monitor `{retrain.monitor}` breached on {retrain.window[0]} .. {retrain.window[1]} "
        f"(champion v{retrain.champion_version}); retrain `{retrain.id}`.",
    ]
    if review is not None:
        observed = "-" if review.observed is None else f"{review.observed:.4g}"
        lines += [
            f"Review `{review.id}`: {review.metric} {observed} (threshold "
            f"{review.threshold:g}) on {', '.join(review.features) or 'the window'}, "
            f"{review.breaches} breach(es).",
            "",
            "Drift evidence:",
            *[f"- {item}" for item in review.evidence],
        ]
    lines += ["", "Approve to promote the candidate; reject to keep the champion. Give a reason."]
    return "\n".join(lines) + "\n\n" + gate_markdown


def record_decision(
    config: ProjectConfig, retrain_id: str, candidate: str, *, decision: str, by: str, reason: str
) -> Retrain:
    """A person's decision on the candidate: on the retrain, the review and the version."""
    store = retrain_store(config)
    try:
        retrain = store.decide(retrain_id, decision=decision, by=by, reason=reason)
    finally:
        store.close()
    _add_evidence(
        config, retrain.review_id, [f"candidate v{candidate} {decision} by {by}: {reason}"]
    )
    registry.tag_model_version(
        config.tracking,
        config.model.name,
        candidate,
        {
            f"{TAG_RETRAIN}.decision": decision,
            f"{TAG_RETRAIN}.decided_by": by,
            f"{TAG_RETRAIN}.decision_reason": reason[:5000],
        },
    )
    return retrain


def fail_retrain(config: ProjectConfig, retrain_id: str, detail: str) -> Retrain:
    """The retrain ended without a gated candidate: frees the slot, says why on the review."""
    store = retrain_store(config)
    try:
        retrain = store.fail(retrain_id, redact_credentials(detail)[:FAILURE_LINE_CHARS])
    finally:
        store.close()
    _add_evidence(config, retrain.review_id, [retrain.outcome])
    return retrain


def _add_evidence(config: ProjectConfig, review_id: str | None, items: list[str]) -> None:
    if review_id is None:
        return
    reviews = review_store(config)
    try:
        reviews.add_evidence(review_id, items)
    finally:
        reviews.close()


def gate_report_of(run_id: str, reports: dict) -> str:
    """The gate report link from a promotion's ``reports`` (kind -> path)."""
    from driftgate.jobs.promote import gate_report_uri

    return gate_report_uri(run_id, Path(reports["markdown"]))
