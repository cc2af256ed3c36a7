"""What the Prefect API shows of a flow run (the test harness's server)."""

from __future__ import annotations


def task_names(flow_run_id) -> tuple[str, ...]:
    """The names of a flow run's tasks, in the order they started (a subflow shows as
    the task that ran it, named after the flow)."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterId
    from prefect.client.schemas.sorting import TaskRunSort

    with get_client(sync_client=True) as client:
        runs = client.read_task_runs(
            flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=[flow_run_id])),
            sort=TaskRunSort.EXPECTED_START_TIME_ASC,
        )
    # A task run is named after its task plus a short random suffix: "fit-model-3b2".
    return tuple(run.name.rsplit("-", 1)[0] for run in runs)
