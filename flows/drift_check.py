"""Prefect flow ``drift-check``: judge the latest window for each monitor, act, publish.

Thin: each window is one task calling :func:`driftgate.jobs.drift_check.judge_window`
(the same function as ``driftgate drift-check``); the flow adds a markdown and a table
artifact per window in the Prefect UI. Deployments run it on each monitor's cron
schedule from the gate config (one source of truth).

Scale-out: with ``dask_cluster`` set, the window's cells (row slices x feature groups,
see :mod:`monitors.partitions`) are summarised as one ``summarise-cell`` task each on
Prefect's Dask task runner (``prefect-dask``): a local cluster, or an existing one by
scheduler address. The merged counts, and so every statistic and
decision, are the same as in process.
"""

from __future__ import annotations

from driftgate.gates.config import load_gate_config
from driftgate.monitors.partitions import Cell, Mapper, WindowPart, summarise_part
from driftgate.monitors.profile import ReferenceProfile
from driftgate.monitors.window import Window
from prefect import flow, get_run_logger, task
from prefect.artifacts import create_markdown_artifact, create_table_artifact
from prefect.cache_policies import NO_CACHE

from driftgate.config import ProjectConfig, load_config
from driftgate.jobs import drift_check as job


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


def dask_mapper(cluster: str) -> Mapper:
    """A mapper (:mod:`monitors.partitions`) that runs each cell as a ``summarise-cell``
    task on a Dask cluster (through Prefect's task runner, so every cell is a task run
    in the Prefect UI). Cells are submitted directly to the runner rather than through a
    subflow: flow parameters go to the Prefect API and are capped at 512 KB, while a
    cell may be a slice of the window in memory."""

    def summarise_on_dask(profile: ReferenceProfile, cells: list[Cell]) -> list[Window]:
        with dask_task_runner(cluster) as runner:
            # The profile (megabytes with exact KS breakpoints) goes to each worker once;
            # distributed resolves the future in every cell's parameters.
            shared = runner.client.scatter(profile, broadcast=True)
            futures = [
                runner.submit(
                    summarise_cell_task,
                    parameters={"profile": shared, "part": part, "features": features},
                )
                for part, features in cells
            ]
            return [future.result() for future in futures]

    return summarise_on_dask


@task(name="judge-window", cache_policy=NO_CACHE)
def judge_window_task(config: ProjectConfig, gates, start, end, monitors, source, mapper=None):
    return job.judge_window(
        config, gates, start, end, monitors=monitors, source=source, mapper=mapper
    )


@flow(name="drift-check")
def drift_check_flow(
    config_path: str | None = None,
    monitor_names: list[str] | None = None,
    end: str | None = None,
    window: str | None = None,
    source: str | None = None,
    dask_cluster: str | None = None,
) -> list[dict]:
    """Judge the window ending at ``end`` (default: now) for the named monitors (default:
    all); returns one JSON-able summary per window. ``dask_cluster`` (``local``,
    ``local:N`` or a scheduler address) summarises each window on Dask."""
    logger = get_run_logger()
    config = load_config(config_path)
    gates = load_gate_config(config.gates)
    mapper = dask_mapper(dask_cluster) if dask_cluster else None
    summaries = []
    planned = job.plan_recent(config, gates, end=end, window=window, monitor_names=monitor_names)
    for start, stop, group in planned:
        verdict = judge_window_task(config, gates, start, stop, group, source, mapper)
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
        summaries.append(verdict.to_summary())
    return summaries
