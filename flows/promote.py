"""Prefect flow ``validate_and_promote``: the promotion job's steps as tasks.

Same functions as ``driftgate promote``; the flow adds the run history in the Prefect
UI and a markdown artifact with the gate table.
"""

from __future__ import annotations

from prefect import flow, get_run_logger, task
from prefect.artifacts import create_markdown_artifact
from prefect.cache_policies import NO_CACHE

from driftgate.config import ProjectConfig, load_config
from driftgate.gates.config import load_gate_config
from driftgate.gates.result import GateResult
from driftgate.jobs import promote as job


@task(name="evaluate-gates", cache_policy=NO_CACHE)
def evaluate_gates_task(config: ProjectConfig, gates, candidate: str | None) -> GateResult:
    return job.evaluate_gates(config, gates, candidate)


@task(name="record-gate", cache_policy=NO_CACHE)
def record_gate_task(config: ProjectConfig, result: GateResult) -> dict:
    folder = config.home_dir / "reports" / f"promote-{result.model_name}-v{result.candidate}"
    files = result.write(folder)
    job.record_gate(config, result, files)
    create_markdown_artifact(
        key=f"gate-{result.model_name}-v{result.candidate}".lower().replace("_", "-"),
        markdown=result.markdown(),
        description="driftgate promotion gate",
    )
    return {kind: str(path) for kind, path in files.items()}


@task(name="move-champion", cache_policy=NO_CACHE)
def promote_task(config: ProjectConfig, result: GateResult) -> str | None:
    return job.promote(config, result)


@flow(name="validate-and-promote")
def validate_and_promote(
    config_path: str | None = None, candidate: str | None = None, gates_path: str | None = None
) -> dict:
    """Evaluate every gate on ``candidate`` (default: latest) and promote it if all pass.

    A failed gate is a completed flow run whose result says ``promoted: False`` (the
    gate did its job); registry errors fail the run.
    """
    logger = get_run_logger()
    config = load_config(config_path)
    gates = load_gate_config(gates_path or config.gates)
    result = evaluate_gates_task(config, gates, candidate)
    logger.info("gate for %s v%s:\n%s", result.model_name, result.candidate, result.table())
    files = record_gate_task(config, result)
    previous = promote_task(config, result) if result.passed else None
    return {
        "model_name": result.model_name,
        "candidate": result.candidate,
        "champion_before": result.champion,
        "passed": result.passed,
        "promoted": result.passed,
        "previous_champion": previous,
        "failed_checks": [c.name for c in result.failures],
        "reports": files,
    }
