"""``driftgate deploy``: register the train, promote and drift-check deployments."""

from __future__ import annotations

from pathlib import Path

import typer

from driftgate.commands.options import EXIT_REGISTRY, EXIT_USAGE, ConfigOption
from driftgate.jobs.deploy import DEFAULT_WORK_POOL


def deploy(
    work_pool: str = typer.Option(
        DEFAULT_WORK_POOL, "--work-pool", "-p", help="Process work pool (created if missing)."
    ),
    worker_config: str | None = typer.Option(
        None,
        "--worker-config",
        help="The project config's path as workers see it (default: this config's absolute "
        "path, for workers on this machine).",
    ),
    no_promote: bool = typer.Option(
        False, "--no-promote", help="The train deployment only registers; no gate run after it."
    ),
    dry_run: bool = typer.Option(False, "--dry-run", help="Print the plan; contact no server."),
    gates_path: Path | None = typer.Option(None, "--gates", help="Gate config with the monitors."),
    config_path: Path | None = ConfigOption,
) -> None:
    """Register driftgate's Prefect deployments; drift checks run on the gate config's cron.

    Needs a Prefect server (PREFECT_API_URL). Start workers with
    `prefect worker start --pool <pool>` (see infra/prefect-worker.sh).
    """
    from driftgate.config import load_config
    from driftgate.gates.config import load_gate_config
    from driftgate.jobs.deploy import describe, plan_deployments

    config = load_config(config_path)
    gates = load_gate_config(gates_path or config.gates)
    if worker_config is None:
        source = config_path or Path("driftgate.yaml")
        worker_config = str(Path(source).resolve()) if Path(source).is_file() else ""
    plans = plan_deployments(
        config, gates, config_path=worker_config or None, promote_after_training=not no_promote
    )
    typer.echo(describe(plans))
    from driftgate.jobs.monitor_plan import deploy_warnings

    for warning in deploy_warnings(config, gates):
        typer.echo(f"warning: {warning}", err=True)
    if dry_run:
        return
    from driftgate.flows.deployments import DeployError, prefect_api_url, register_deployments

    api_url = prefect_api_url()
    if not api_url:
        typer.echo(
            "error: no Prefect server: set PREFECT_API_URL (e.g. http://127.0.0.1:4200/api). "
            "Deployments registered with Prefect's temporary local server would vanish with it.",
            err=True,
        )
        raise typer.Exit(EXIT_USAGE)

    try:
        registered = register_deployments(plans, work_pool)
    except DeployError as exc:
        typer.echo(f"error: {exc} (PREFECT_API_URL={api_url})", err=True)
        raise typer.Exit(EXIT_REGISTRY) from None
    created = " (created)" if registered.work_pool_created else ""
    typer.echo(f"\n{len(registered.deployment_ids)} deployments on {api_url}")
    typer.echo(f"work pool {registered.work_pool}{created}: start a worker with")
    typer.echo(f"  prefect worker start --pool {registered.work_pool}")
    for name in registered.stale:
        typer.echo(
            f"note: {name} is no longer in the gate config; delete it with "
            f"`prefect deployment delete '{name}'`"
        )
