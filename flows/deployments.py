"""Register driftgate's deployments (see :mod:`driftgate.jobs.deploy`) with a Prefect server.

The flows are deployed by module path (``driftgate.flows.drift_check.drift_check_flow``) to a
``process`` work pool: a worker started where driftgate is installed (a VM, or the
container image of ``infra/compose.yaml``) imports them from the package, so nothing is
built or uploaded. Registering again updates the deployments in place; a monitor removed
from the gate config leaves its old deployment behind, so ``register_deployments``
reports the driftgate deployments it did not (re)write.
"""

from __future__ import annotations

import importlib
import os
from dataclasses import dataclass

from driftgate.core.errors import EXIT_BACKEND, DriftgateError
from driftgate.jobs.deploy import DeploymentPlan


class DeployError(DriftgateError, RuntimeError):
    """The Prefect server could not be reached or refused the deployments."""

    exit_code = EXIT_BACKEND


@dataclass
class Registered:
    deployment_ids: dict[str, str]  # full name -> id
    work_pool: str
    work_pool_created: bool
    stale: list[str]  # driftgate deployments of this model the plan no longer has


def prefect_api_url() -> str | None:
    """``$PREFECT_API_URL``, else the active Prefect profile's (``prefect config set``)."""
    from prefect.settings import PREFECT_API_URL

    return os.environ.get("PREFECT_API_URL") or PREFECT_API_URL.value()


def _flow_of(entrypoint: str):
    module_name, _, attribute = entrypoint.rpartition(".")
    return getattr(importlib.import_module(module_name), attribute)


def ensure_process_pool(name: str) -> bool:
    """Create the ``process`` work pool ``name`` unless it exists; True if created."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.actions import WorkPoolCreate
    from prefect.exceptions import ObjectAlreadyExists, ObjectNotFound
    from prefect.workers.process import ProcessWorker

    with get_client(sync_client=True) as client:
        try:
            pool = client.read_work_pool(name)
        except ObjectNotFound:
            try:
                client.create_work_pool(
                    WorkPoolCreate(
                        name=name,
                        type=ProcessWorker.type,
                        base_job_template=ProcessWorker.get_default_base_job_template(),
                        description="driftgate flows: workers run them from the installed package",
                    )
                )
                return True
            except ObjectAlreadyExists:
                # A worker started on this pool creates it too: it won the race between
                # our read and our create. Judge the pool it made like any other.
                pool = client.read_work_pool(name)
        if pool.type != ProcessWorker.type:
            raise DeployError(
                f"work pool '{name}' exists with type '{pool.type}', driftgate needs "
                f"'{ProcessWorker.type}' (choose another pool with --work-pool)"
            )
        return False


def register_deployments(plans: list[DeploymentPlan], work_pool: str) -> Registered:
    """Create or update every planned deployment on the server named by ``PREFECT_API_URL``."""
    import httpx
    from prefect import deploy
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import DeploymentFilter, DeploymentFilterTags
    from prefect.deployments.runner import EntrypointType

    try:
        created = ensure_process_pool(work_pool)
        deployments = [
            _flow_of(plan.entrypoint).to_deployment(
                name=plan.name,
                cron=plan.cron,
                parameters=plan.parameters,
                description=plan.description,
                tags=plan.tags,
                entrypoint_type=EntrypointType.MODULE_PATH,
                work_pool_name=work_pool,
            )
            for plan in plans
        ]
        ids = deploy(
            *deployments,
            work_pool_name=work_pool,
            build=False,
            push=False,
            print_next_steps_message=False,
            ignore_warnings=True,
        )
        model_tags = sorted({t for plan in plans for t in plan.tags if t.startswith("model:")})
        with get_client(sync_client=True) as client:
            existing = client.read_deployments(
                deployment_filter=DeploymentFilter(tags=DeploymentFilterTags(all_=model_tags))
            )
            flow_names = {f.id: f.name for f in client.read_flows()}
    except (httpx.HTTPError, OSError) as exc:
        raise DeployError(f"Prefect server unreachable: {exc}") from exc
    wanted = {plan.full_name for plan in plans}
    stale = sorted(
        f"{flow_names.get(d.flow_id, d.flow_id)}/{d.name}"
        for d in existing
        if f"{flow_names.get(d.flow_id, d.flow_id)}/{d.name}" not in wanted
    )
    return Registered(
        deployment_ids={plan.full_name: str(i) for plan, i in zip(plans, ids, strict=True)},
        work_pool=work_pool,
        work_pool_created=created,
        stale=stale,
    )
