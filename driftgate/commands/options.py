"""Options and exit codes shared by every ``driftgate`` command."""

from __future__ import annotations

import typer

ConfigOption = typer.Option(
    None,
    "--config",
    "-c",
    help="Project config file (default: ./driftgate.yaml, else embedded defaults).",
    dir_okay=False,
)

EXIT_FAILED = 1  # a check failed (gate, data contract, monitor)
EXIT_USAGE = 2  # bad usage, configuration or input data
EXIT_REGISTRY = 3  # the MLflow registry or another server failed


def setup_logging(verbose: bool) -> None:
    import logging

    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        datefmt="%H:%M:%S",
    )
    # MLflow and friends are chatty at INFO; keep driftgate's own progress visible.
    for noisy in ("mlflow", "alembic", "urllib3", "httpx", "great_expectations"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
