"""Prefect flow ``sample-retention``: one retention pass over the sample store.

Thin: :func:`driftgate.jobs.retention.purge_samples` (the same as ``driftgate samples
purge``), plus a markdown artifact of what went. ``driftgate deploy`` schedules it
hourly when ``serving.sample_retention`` is set.
"""

from __future__ import annotations

import json

from prefect import flow, get_run_logger
from prefect.artifacts import create_markdown_artifact

from driftgate.config import load_config
from driftgate.jobs.retention import purge_samples


@flow(name="sample-retention")
def sample_retention_flow(config_path: str | None = None) -> dict:
    """Remove samples older than ``serving.sample_retention``; returns what went."""
    logger = get_run_logger()
    config = load_config(config_path)
    result = purge_samples(config).to_dict()
    logger.info(
        "samples before %s: %d rows deleted, %d partitions dropped, %d kept (protected)",
        result["cutoff"],
        result["deleted_rows"],
        len(result["dropped_partitions"]),
        len(result["kept_partitions"]),
    )
    create_markdown_artifact(
        key=f"sample-retention-{config.model.name}".lower()[:100],
        markdown=f"```json\n{json.dumps(result, indent=2)}\n```\n",
        description="driftgate sample retention",
    )
    return result
