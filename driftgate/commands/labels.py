"""``driftgate labels``: delayed labels from files, judged as ``POST /feedback`` judges them."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from driftgate.commands.options import ConfigOption

labels_app = typer.Typer(help="Delayed labels of served records.", no_args_is_help=True)


@labels_app.command("load")
def load(
    path: Path = typer.Argument(
        ..., help="CSV or Parquet file with request_id, record_index, label.", dir_okay=False
    ),
    config_path: Path | None = ConfigOption,
    source: str = typer.Option(
        "labels-load",
        "--source",
        help="Who vouches for these labels, stored with each (e.g. the system that "
        "produced the file); 'unverified' for labels nobody vouches for, which a retrain "
        "never scores a candidate on.",
        callback=lambda value: _source_name(value),
    ),
) -> None:
    """Store a file's labels beside the samples they label (joined by request id and
    record index). Rows that pass are kept, the others counted: prints the counts of
    accepted, duplicates, corrected, unsampled, unknown, late, invalid and conflicting
    rows as JSON, with the first problems. Exit 1 when any row was refused."""
    from driftgate.config import load_config
    from driftgate.jobs.feedback import load_labels

    config = load_config(config_path)
    outcome = load_labels(config, path, source=source)
    problems = [
        {**r.to_dict(), "kind": kind}
        for kind in ("unknown", "late", "invalid", "conflicts")
        for r in getattr(outcome, kind)
    ]
    typer.echo(json.dumps({"counts": outcome.counts(), "problems": problems[:20]}, indent=2))
    if outcome.refused:
        raise typer.Exit(1)


def _source_name(value: str) -> str:
    """A source is stored with each label and shown in retrain summaries: the same
    names as ``serving.label_sources`` (``unverified`` allowed, ``admin`` is the token's)."""
    from driftgate.config.serving import ADMIN_SOURCE, SOURCE_NAME

    if not SOURCE_NAME.fullmatch(value) or value == ADMIN_SOURCE:
        raise typer.BadParameter(
            f"{value!r}: a source is 1-64 lowercase letters, digits, '.', '_' or '-', "
            "starting with a letter, and not 'admin'",
            param_hint="'--source'",
        )
    return value
