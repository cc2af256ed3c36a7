"""``driftgate replay``: a production file through the running service, then its labels."""

from __future__ import annotations

from pathlib import Path

import typer

from driftgate.commands.options import EXIT_FAILED, ConfigOption

# The shell's code for a command stopped by Ctrl-C (128 + SIGINT).
EXIT_INTERRUPTED = 130


def replay(
    path: Path | None = typer.Argument(
        None,
        help="CSV or Parquet production file; default: data.production.",
        dir_okay=False,
    ),
    rate: float | None = typer.Option(
        None, "--rate", min=0.001, help="At most this many rows a second (default: no limit)."
    ),
    labels_after: str | None = typer.Option(
        None,
        "--labels-after",
        help="Event time between a request and its label, e.g. 30d or 12h: each label "
        "is sent once the replay is that far past its row (the rest at the end); "
        "default: right after its request.",
    ),
    url: str | None = typer.Option(
        None, "--url", help="The service; default: http://serving.host:serving.port."
    ),
    key: str | None = typer.Option(
        None, "--key", help="The id column of the rows; default: data.labels.key."
    ),
    token_env: str | None = typer.Option(
        None,
        "--token-env",
        help="Environment variable with the bearer token for POST /feedback (a label "
        "source's); default: serving.admin_token_env.",
    ),
    no_labels: bool = typer.Option(False, "--no-labels", help="Send the rows only."),
    config_path: Path | None = ConfigOption,
) -> None:
    """Send a production file through the running service (POST /predict) in event
    time order, each request id derived from the row's id column, then its labels
    (POST /feedback). A rerun is idempotent: rows the service logged before answer
    409 and are counted as already sent. Exit 1 when a request failed or a label was
    refused, 130 when interrupted (run it again to resume)."""
    import os

    from driftgate.config import load_config
    from driftgate.jobs.replay import ReplayError, replay_file
    from driftgate.monitors.durations import parse_duration

    config = load_config(config_path)
    try:
        delay = None if labels_after is None else parse_duration(labels_after)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="'--labels-after'") from None
    token = None
    if token_env is not None:
        token = os.environ.get(token_env)
        if not token:
            raise ReplayError(f"--token-env: ${token_env} is not set")
    outcome = replay_file(
        config,
        path,
        url=url,
        rate=rate,
        labels_after=delay,
        key=key,
        send_labels=not no_labels,
        token=token,
        say=typer.echo,
    )
    counts = outcome.counts
    if outcome.interrupted:
        typer.echo(
            f"interrupted: {counts.line(outcome.seconds)}. Every request the service "
            "answered is logged; run the same command again to resume (logged rows "
            "answer 409, waiting labels are sent again)"
        )
        raise typer.Exit(EXIT_INTERRUPTED)
    typer.echo(f"done in {outcome.seconds:.1f} s: {counts.line(outcome.seconds)}")
    for problem in outcome.problems[:10]:
        typer.echo(f"  {problem}")
    if not outcome.complete:
        raise typer.Exit(EXIT_FAILED)
