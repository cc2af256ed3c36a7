"""Prefect flow ``drift-check``: judge the latest window for each monitor, act, publish.

Thin: each window is one task calling :func:`driftgate.jobs.drift_check.judge_window`
(the same function as ``driftgate drift-check``); the flow adds a markdown and a table
artifact per window in the Prefect UI. Deployments run it on each monitor's cron
schedule from the gate config (one source of truth).
"""

from __future__ import annotations

from prefect import flow, get_run_logger, task
from prefect.artifacts import create_markdown_artifact, create_table_artifact
from prefect.cache_policies import NO_CACHE

from driftgate.config import ProjectConfig, load_config
from driftgate.jobs import drift_check as job
from gates.config import load_gate_config


@task(name="judge-window", cache_policy=NO_CACHE)
def judge_window_task(config: ProjectConfig, gates, start, end, monitors, source):
    return job.judge_window(config, gates, start, end, monitors=monitors, source=source)


@flow(name="drift-check")
def drift_check_flow(
    config_path: str | None = None,
    monitor_names: list[str] | None = None,
    end: str | None = None,
    window: str | None = None,
    source: str | None = None,
) -> list[dict]:
    """Judge the window ending at ``end`` (default: now) for the named monitors (default:
    all); returns one JSON-able summary per window."""
    logger = get_run_logger()
    config = load_config(config_path)
    gates = load_gate_config(config.gates)
    summaries = []
    for start, stop, group in job.plan_windows(gates, end=end, window=window, names=monitor_names):
        verdict = judge_window_task(config, gates, start, stop, group, source)
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
