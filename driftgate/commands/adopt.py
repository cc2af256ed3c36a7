"""``driftgate adopt``: a model trained and logged elsewhere, made a version driftgate
gates, serves and monitors (:mod:`driftgate.jobs.adopt`)."""

from __future__ import annotations

from pathlib import Path

import typer

from driftgate.commands.options import ConfigOption, setup_logging


def adopt(
    model_uri: str = typer.Argument(
        ...,
        metavar="MODEL_URI",
        help="models:/NAME/VERSION, or runs:/RUN_ID/PATH (registered as a version of "
        "model.name first).",
    ),
    reference: Path = typer.Option(
        ...,
        "--reference",
        "-r",
        help="Reference data (CSV/Parquet): profile, contract and signature check.",
        dir_okay=False,
    ),
    test: Path | None = typer.Option(
        None, "--test", help="Held-out data with the target: test_* metrics.", dir_okay=False
    ),
    config_path: Path | None = ConfigOption,
    verbose: bool = typer.Option(False, "--verbose", "-v"),
) -> None:
    """Adopt a model trained elsewhere: check its signature against the reference data,
    fit the reference profile and data contract, record metrics and tag the version.

    Then `promote`, `serve` and `drift-check` work on it like on a version driftgate
    trained. Adopting the same version with the same reference again changes nothing.
    Exit 2: bad URI, unknown version, signature mismatch. 3: the allow-list refused
    the model, or the registry failed.
    """
    setup_logging(verbose)
    from driftgate.config import load_config
    from driftgate.jobs.adopt import run_adoption

    config = load_config(config_path)

    outcome = run_adoption(config, model_uri, reference, test)
    if outcome.registered_from:
        typer.echo(f"{outcome.registered_from} is {outcome.model_uri}")
    if not outcome.changed:
        typer.echo(f"{outcome.model_uri} was adopted before from the same data; nothing changed.")
        return
    typer.echo(f"adopted {outcome.model_uri} (run {outcome.run_id})")
    typer.echo(f"  features  {len(outcome.features)}: {', '.join(outcome.features)}")
    for name, value in outcome.metrics.items():
        typer.echo(f"  {name:<22}{value:.4f}")
    typer.echo(f"next: driftgate promote --candidate {outcome.version}")
