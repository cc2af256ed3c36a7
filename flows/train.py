"""Prefect flow ``train``: the training job's steps as tasks, nothing more.

Each task calls one function of :mod:`driftgate.jobs.train`; ``driftgate train``
calls the same functions without Prefect, so the flow adds orchestration (retries,
the run's history in the Prefect UI) and no behaviour of its own. Tasks are not
cached: their inputs are data frames and models, and a training run must re-run.
"""

from __future__ import annotations

from prefect import flow, get_run_logger, task
from prefect.cache_policies import NO_CACHE

from driftgate.config import ProjectConfig, load_config
from driftgate.jobs import retrain as retrain_job
from driftgate.jobs import train as job


@task(name="prepare-data", cache_policy=NO_CACHE)
def prepare_data_task(config: ProjectConfig) -> job.PreparedData:
    return job.prepare_data(config)


@task(name="fit-model", cache_policy=NO_CACHE)
def fit_model_task(config: ProjectConfig, data: job.PreparedData):
    logger = get_run_logger()

    def report(record) -> None:
        logger.info(
            "epoch %d: train_loss %.4f val_loss %.4f",
            record.epoch,
            record.train_loss,
            record.val_loss,
        )

    return job.fit_model(config, data, on_epoch=report)


@task(name="evaluate-model", cache_policy=NO_CACHE)
def evaluate_model_task(config: ProjectConfig, data: job.PreparedData, result) -> dict[str, float]:
    return job.evaluate_model(config, data, result)


@task(name="register-model", cache_policy=NO_CACHE)
def register_model_task(
    config: ProjectConfig, data: job.PreparedData, result, metrics: dict[str, float]
) -> job.TrainingOutcome:
    return job.register_model(config, data, result, metrics)


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
        data = prepare_data_task(config)
        result = fit_model_task(config, data)
        metrics = evaluate_model_task(config, data, result)
        outcome = register_model_task(config, data, result, metrics)
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
