"""Prefect flow ``train``: the training job's journey with its steps as tasks, nothing more.

:func:`driftgate.jobs.train.run_training` runs its steps (``prepare-data``,
``fit-model``, ``evaluate-model``, ``register-model``) through the flows' step runner
(:mod:`driftgate.flows.steps`), one task each; ``driftgate train`` runs the same
function without Prefect, so the flow adds orchestration (the run's history in the
Prefect UI) and no behaviour of its own.
"""

from __future__ import annotations

from functools import partial

from prefect import flow, get_run_logger
from prefect.context import FlowRunContext

from driftgate.config import ProjectConfig, load_config
from driftgate.flows.steps import prefect_step
from driftgate.jobs import retrain as retrain_job
from driftgate.jobs import train as job
from driftgate.stores.retrains import Retrain
from driftgate.training.train import EpochRecord


def log_epoch(record: EpochRecord) -> None:
    """Each epoch in the ``fit-model`` task's log (the Prefect UI shows it)."""
    get_run_logger().info(
        "epoch %d: train_loss %.4f val_loss %.4f",
        record.epoch,
        record.train_loss,
        record.val_loss,
    )


def gate_in_subflow(
    config: ProjectConfig, retrain: Retrain, candidate: str, *, config_path: str | None
) -> dict:
    """A retrain's gate (:data:`driftgate.jobs.retrain.Gate`) as the ``validate-and-promote``
    subflow. A person is waited for only when this train run is a run of its own (a
    deployment's), never when it is itself a subflow of a drift check."""
    from driftgate.flows.promote import validate_and_promote

    own_run = FlowRunContext.get().flow_run.parent_task_run_id is None
    return validate_and_promote(
        config_path=config_path, candidate=candidate, retrain_id=retrain.id, wait_for_person=own_run
    )


@flow(name="train", log_prints=True)
def train_flow(
    config_path: str | None = None,
    promote: bool = False,
    retrain_id: str | None = None,
    approval_timeout_s: int | None = None,
) -> dict:
    """Train on the configured data set and register a new model version.

    With ``promote=True`` the new version goes straight through ``validate-and-promote``
    (a subflow). ``retrain_id``: the run was started by a ``retrain`` monitor action
    (:mod:`driftgate.flows.retrain`): it is that retrain's journey,
    :func:`driftgate.jobs.retrain.run_retrain` (always gated, whatever ``promote``
    says), which records its outcome or its failure on the retrain and its review.
    ``approval_timeout_s`` is ignored: the retrain's own row says whether a person
    approves it and how long they are waited for; the parameter stays so that runs
    created by an older launcher still start.
    Returns a JSON-able summary (run id, model version, metrics, gate).
    """
    config = load_config(config_path)
    if retrain_id is not None:
        retrained = retrain_job.run_retrain(
            config,
            retrain_id,
            run_step=prefect_step,
            on_epoch=log_epoch,
            gate=partial(gate_in_subflow, config_path=config_path),
        )
        outcome, gate = retrained.training, retrained.gate
    else:
        outcome = job.run_training(config, on_epoch=log_epoch, run_step=prefect_step)
        gate = None
        if promote:
            from driftgate.flows.promote import validate_and_promote

            gate = validate_and_promote(
                config_path=config_path, candidate=outcome.registered.version
            )
    registered = outcome.registered
    return {
        "gate": gate,
        "model_name": registered.model_name,
        "version": registered.version,
        "run_id": registered.run_id,
        "experiment_id": registered.experiment_id,
        "model_uri": registered.model_uri,
        "metrics": outcome.metrics,
        "data_digest": outcome.data_digest,
    }
