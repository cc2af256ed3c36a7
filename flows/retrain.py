"""Where a ``retrain`` action's retrain runs when Prefect is around: the launcher
(:data:`driftgate.jobs.retrain.Launcher`) that the drift-check flow and the CLI hand to
the drift check.

With a Prefect server configured (``PREFECT_API_URL`` or the active profile) that has
the ``train/<model>`` deployment (``driftgate deploy``), it creates a run of that
deployment (``promote=True``, the retrain's id) and returns at once: a worker trains,
the train flow gates the candidate and records the outcome
(:func:`driftgate.jobs.retrain.record_outcome`). Otherwise, the train and promotion
jobs run in process (:func:`driftgate.jobs.retrain.run_locally`): no server is ever
started for it, so ``driftgate drift-check`` stays off Prefect's temporary server.
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


def launch(config: ProjectConfig, retrain: Retrain) -> Retrain:
    """Start ``retrain`` as a run of the train deployment, or in process without one."""
    name = train_deployment(config)
    if prefect_api_url() is None:
        return job.run_locally(config, retrain)
    if not deployment_exists(name):
        log.warning("no Prefect deployment %s (driftgate deploy): retraining in process", name)
        return job.run_locally(config, retrain)
    from prefect.deployments import run_deployment

    flow_run = run_deployment(
        name,
        parameters={
            "promote": True,
            "retrain_id": retrain.id,
            "approval_timeout_s": retrain.approval_timeout_s,  # None: no approval
        },
        timeout=0,  # do not wait: the train flow records the outcome
        tags=["driftgate", "retrain", f"monitor:{retrain.monitor}"],
    )
    log.info("retrain %s: Prefect flow run %s of %s", retrain.id, flow_run.id, name)
    return job.mark_launched(config, retrain, job.PREFECT, str(flow_run.id))
