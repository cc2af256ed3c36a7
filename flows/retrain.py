"""Where a ``retrain`` action's retrain runs when Prefect is around: the launcher
(:data:`driftgate.jobs.retrain.Launcher`) that the drift-check flow and the CLI hand to
the drift check.

The launcher chooses only where the retrain runs; what runs is always the one retrain
journey, :func:`driftgate.jobs.retrain.run_retrain` (its data, the training steps, the
gate, :func:`driftgate.jobs.retrain.decide_approval`, the outcome).

With a Prefect server configured (``PREFECT_API_URL`` or the active profile) that has
the ``train/<model>`` deployment (``driftgate deploy``), it creates a run of that
deployment (``promote=True``, the retrain's id) and returns at once: a worker runs the
train flow, which runs the journey (and, with ``approval: required``, waits for a
person). Otherwise, inside a flow run (the drift-check flow on embedded defaults,
Prefect's local mode, as ``driftgate demo`` runs it), the ``train`` flow runs here as a
subflow, so the retrain is a flow run in the Prefect UI beside the drift check that
started it; every call outside a flow run (``driftgate drift-check``) runs the journey
in process (:func:`driftgate.jobs.retrain.run_locally`): no server is ever started for
it, so the CLI stays off Prefect's temporary server. Neither waits for a person inside
a drift check: a candidate that needs approval is left for one to promote.
"""

from __future__ import annotations

import logging

from driftgate.config import ProjectConfig
from driftgate.flows.deployments import prefect_api_url
from driftgate.jobs import retrain as job
from driftgate.stores.retrains import Retrain

log = logging.getLogger(__name__)


def train_deployment(config: ProjectConfig) -> str:
    """The deployment ``driftgate deploy`` registers for training this model."""
    return f"train/{config.model.name}"


def deployment_exists(name: str) -> bool:
    from prefect.client.orchestration import get_client
    from prefect.exceptions import ObjectNotFound

    with get_client(sync_client=True) as client:
        try:
            client.read_deployment_by_name(name)
        except ObjectNotFound:
            return False
    return True


def launch(config: ProjectConfig, retrain: Retrain, config_path: str | None = None) -> Retrain:
    """Start ``retrain`` as a run of the train deployment; without one, as a subflow
    when called inside a flow run (``config_path``: the config that flow loaded), else
    in process."""
    name = train_deployment(config)
    if prefect_api_url() is None or not deployment_exists(name):
        if prefect_api_url() is not None:
            log.warning("no Prefect deployment %s (driftgate deploy): retraining here", name)
        if in_flow_run():
            return run_train_subflow(config, retrain, config_path)
        return job.run_locally(config, retrain)
    from prefect.deployments import run_deployment

    flow_run = run_deployment(
        name,
        # The retrain's row says whether a person approves it: nothing else to pass.
        parameters={"promote": True, "retrain_id": retrain.id},
        timeout=0,  # do not wait: the train flow records the outcome
        tags=["driftgate", "retrain", f"monitor:{retrain.monitor}"],
    )
    log.info("retrain %s: Prefect flow run %s of %s", retrain.id, flow_run.id, name)
    return job.mark_launched(config, retrain, job.PREFECT, str(flow_run.id))


def in_flow_run() -> bool:
    """True inside a Prefect flow run (or one of its tasks)."""
    from prefect.context import FlowRunContext, TaskRunContext

    return FlowRunContext.get() is not None or TaskRunContext.get() is not None


def run_train_subflow(config: ProjectConfig, retrain: Retrain, config_path: str | None) -> Retrain:
    """The ``train`` flow (then ``validate-and-promote``) for ``retrain``, here, as a
    subflow; it records the outcome or the failure itself. Returns the finished retrain,
    with the subflow's run id."""
    from driftgate.flows.train import train_flow

    job.mark_launched(config, retrain, job.PREFECT)
    state = train_flow(
        config_path=config_path, promote=True, retrain_id=retrain.id, return_state=True
    )
    flow_run_id = str(state.state_details.flow_run_id)
    log.info("retrain %s: train flow run %s ended %s", retrain.id, flow_run_id, state.type.value)
    return job.mark_launched(config, retrain, job.PREFECT, flow_run_id)
