"""``driftgate monitors``: what the gate config's monitors can promise at this traffic."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from driftgate.commands.options import ConfigOption

monitors_app = typer.Typer(help="The gate config's production monitors.", no_args_is_help=True)


@monitors_app.command("plan")
def plan(
    rows_per_window: int | None = typer.Option(
        None,
        "--rows-per-window",
        min=1,
        help="Rows each window holds (default: measured in the sample store over the last day).",
    ),
    within: int = typer.Option(12, "--within", min=1, help="Checks for the 80% power figure."),
    gates_path: Path | None = typer.Option(None, "--gates", help="Gate config with the monitors."),
    as_json: bool = typer.Option(False, "--json", help="Print the plans as JSON."),
    config_path: Path | None = ConfigOption,
) -> None:
    """Per monitor, from the champion's reference profile and the traffic per window:
    expected false alarms per month (calibrated bound; the bare threshold's), the fewest
    rows per window the rule needs, the smallest shift detected with 80% power within
    N checks, and warnings when the schedule and traffic cannot support the rule."""
    from driftgate.config import load_config
    from driftgate.gates.config import load_gate_config
    from driftgate.jobs.monitor_plan import describe, plan_monitors

    config = load_config(config_path)
    gates = load_gate_config(gates_path or config.gates)
    plans = plan_monitors(config, gates, rows_per_window=rows_per_window, within=within)
    if as_json:
        typer.echo(json.dumps([p.to_dict() for p in plans], indent=2, default=str))
    else:
        typer.echo(describe(plans, within))
