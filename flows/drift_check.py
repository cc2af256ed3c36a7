"""Prefect flow ``drift-check``: judge the latest window for each monitor, act, publish.

Thin: each window is :func:`driftgate.jobs.drift_check.judge_window` (the same function
as ``driftgate drift-check``) with the flows' step runner (:mod:`driftgate.flows.steps`),
so its seven steps, ``read-window``, ``validate-window``, ``summarise-window``,
``decide``, ``record``, ``act`` and ``report`` (the Evidently report, after the
actions), are one task each and the Prefect UI shows where a run spent its time or
failed; the flow adds a markdown and a table artifact per window, and for a review to
which a window's refused traffic added a contract revision proposal, asks a person in
the Prefect UI (:func:`driftgate.flows.contract_revision.ask_for_review`).
Deployments run it on each monitor's cron schedule from the gate config (one source of
truth).

Scale-out: with ``dask_cluster`` set, the window's cells (row slices x feature groups,
see :mod:`monitors.partitions`) are summarised as one ``summarise-cell`` task each on
Prefect's Dask task runner (``prefect-dask``): a local cluster, or an existing one by
scheduler address. The merged counts, and so every statistic and
decision, are the same as in process.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from functools import partial

from prefect import flow, get_run_logger, task
from prefect.artifacts import create_markdown_artifact, create_table_artifact
from prefect.cache_policies import NO_CACHE

from driftgate.config import load_config
from driftgate.flows.contract_revision import ask_for_review
from driftgate.flows.retrain import launch as launch_retrain
from driftgate.flows.steps import prefect_step
from driftgate.gates.config import load_gate_config
from driftgate.jobs import drift_check as job
from driftgate.jobs.window_plan import plan_recent
from driftgate.monitors.partitions import Cell, Mapper, WindowPart, summarise_part
from driftgate.monitors.profile import ReferenceProfile
from driftgate.monitors.window import Window


@task(name="summarise-cell", cache_policy=NO_CACHE)
def summarise_cell_task(profile: ReferenceProfile, part: WindowPart, features: list[str]):
    return summarise_part(profile, part, features)


def dask_task_runner(cluster: str):
    """``local`` / ``local:N`` (a local cluster of N single-threaded worker processes,
    default 2) or a scheduler address (``tcp://host:8786``)."""
    from prefect_dask import DaskTaskRunner

    if cluster == "local" or cluster.startswith("local:"):
        workers = int(cluster.partition(":")[2] or 2)
        return DaskTaskRunner(
            cluster_kwargs={"n_workers": workers, "threads_per_worker": 1, "processes": True}
        )
    return DaskTaskRunner(address=cluster)


def _submit_cells(runner, shared, cells: list[Cell]) -> list[Window]:
    futures = [
        runner.submit(
            summarise_cell_task,
            parameters={"profile": shared, "part": part, "features": features},
        )
        for part, features in cells
    ]
    return [future.result() for future in futures]


def dask_mapper(cluster: str) -> Mapper:
    """A mapper (:mod:`monitors.partitions`) that runs each cell as a ``summarise-cell``
    task on a Dask cluster (through Prefect's task runner, so every cell is a task run
    in the Prefect UI). Cells are submitted directly to the runner rather than through a
    subflow: flow parameters go to the Prefect API and are capped at 512 KB, while a
    cell may be a slice of the window in memory.

    Called, it starts the runner for that call. Its ``session()`` (used by
    :func:`monitors.partitions.summarise_stream`, which calls a mapper once per chunk
    of a streamed window) keeps one runner, and the profile scattered once, for every
    call made inside it.
    """

    def summarise_on_dask(profile: ReferenceProfile, cells: list[Cell]) -> list[Window]:
        with dask_task_runner(cluster) as runner:
            # The profile (megabytes with exact KS breakpoints) goes to each worker once;
            # distributed resolves the future in every cell's parameters.
            shared = runner.client.scatter(profile, broadcast=True)
            return _submit_cells(runner, shared, cells)

    @contextlib.contextmanager
    def session() -> Iterator[Mapper]:
        with dask_task_runner(cluster) as runner:
            scattered: dict[int, object] = {}

            def mapped(profile: ReferenceProfile, cells: list[Cell]) -> list[Window]:
                if id(profile) not in scattered:
                    scattered.clear()
                    scattered[id(profile)] = runner.client.scatter(profile, broadcast=True)
                return _submit_cells(runner, scattered[id(profile)], cells)

            yield mapped

    summarise_on_dask.session = session
    return summarise_on_dask


@flow(name="drift-check")
def drift_check_flow(
    config_path: str | None = None,
    monitor_names: list[str] | None = None,
    end: str | None = None,
    window: str | None = None,
    source: str | None = None,
    dask_cluster: str | None = None,
    gates_path: str | None = None,
) -> list[dict]:
    """Judge the window ending at ``end`` (default: now) for the named monitors (default:
    all); returns one JSON-able summary per window. ``dask_cluster`` (``local``,
    ``local:N`` or a scheduler address) summarises each window on Dask; ``gates_path``:
    the gate config with the monitors (default: the project's ``gates``), as
    ``driftgate drift-check --gates``."""
    logger = get_run_logger()
    config = load_config(config_path)
    gates = load_gate_config(gates_path or config.gates)
    mapper = dask_mapper(dask_cluster) if dask_cluster else None
    summaries = []
    planned = plan_recent(config, gates, end=end, window=window, monitor_names=monitor_names)
    for start, stop, group in planned:
        verdict = job.judge_window(
            config,
            gates,
            start,
            stop,
            monitors=group,
            source=source,
            mapper=mapper,
            # A retrain action runs the train deployment where one is registered, else
            # the train flow as a subflow (flows/retrain.py); ``config_path`` is where
            # ``config`` came from (that train flow loads it again).
            launcher=partial(launch_retrain, config_path=config_path),
            run_step=prefect_step,
        )
        logger.info(
            "window %s..%s: %d rows, breached %s, actions %d (report %s)",
            start,
            stop,
            verdict.rows,
            verdict.breached or "-",
            len(verdict.actions),
            verdict.report_dir,
        )
        slug = f"drift-{config.model.name}-{'-'.join(m.name for m in group)}".lower()
        create_markdown_artifact(
            key=slug[:100], markdown=verdict.markdown(), description="driftgate drift check"
        )
        create_table_artifact(
            key=f"{slug}-table"[:100], table=verdict.summary_rows(), description="monitors"
        )
        for review_id in verdict.proposals:  # a person decides: ask in the Prefect UI
            logger.info("review %s: %s", review_id, ask_for_review(config, review_id))
        summaries.append(verdict.to_summary())
    return summaries
