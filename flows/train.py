"""Prefect flow ``train``: the training job's journey with its steps as tasks, nothing more.

:func:`driftgate.jobs.train.run_training` runs its steps (``prepare-data``,
``fit-model``, ``evaluate-model``, ``register-model``) through the flows' step runner
(:mod:`driftgate.flows.steps`), one task each; ``driftgate train`` runs the same
function without Prefect, so the flow adds orchestration (the run's history in the
Prefect UI) and no behaviour of its own.
"""

from __future__ import annotations

from prefect import flow, get_run_logger

from driftgate.config import load_config
from driftgate.flows.steps import prefect_step
from driftgate.jobs import retrain as retrain_job
from driftgate.jobs import train as job
from driftgate.training.train import EpochRecord


def log_epoch(record: EpochRecord) -> None:
    """Each epoch in the ``fit-model`` task's log (the Prefect UI shows it)."""
    get_run_logger().info(
        "epoch %d: train_loss %.4f val_loss %.4f",
        record.epoch,
        record.train_loss,
        record.val_loss,
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
    (:mod:`driftgate.flows.retrain`); its outcome, or its failure, is recorded on the
    retrain and its review; ``approval_timeout_s``: its monitor says ``approval:
    required``, so a candidate that passes the gate waits that long for a person.
    Returns a JSON-able summary (run id, model version, metrics, gate).
    """
    config = load_config(config_path)
    try:
        if retrain_id is not None:  # the configured data plus the breaching window
            config = retrain_job.retrain_config(config, retrain_id)
        outcome = job.run_training(config, on_epoch=log_epoch, run_step=prefect_step)
        registered = outcome.registered
        gate = None
        if promote:
            from driftgate.flows.promote import validate_and_promote

            gate = validate_and_promote(
                config_path=config_path,
                candidate=registered.version,
                retrain_id=retrain_id,
                approval_timeout_s=approval_timeout_s,
            )
    except Exception as exc:
        if retrain_id is not None:
            retrain_job.fail_retrain(config, retrain_id, f"{type(exc).__name__}: {exc}")
        raise
    if retrain_id is not None:
        if gate is None:
            retrain_job.fail_retrain(config, retrain_id, "trained without the gate (promote=False)")
        else:
            retrain_job.record_outcome(
                config,
                retrain_id,
                run_id=registered.run_id,
                candidate=registered.version,
                passed=gate["passed"],
                promoted=gate["promoted"],
                gate_report=retrain_job.gate_report_of(registered.run_id, gate["reports"]),
            )
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
