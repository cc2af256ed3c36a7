"""Options and exit codes shared by every ``driftgate`` command."""

from __future__ import annotations

import typer

from driftgate.core.errors import EXIT_BACKEND, EXIT_CHECK_FAILED, EXIT_USAGE
from driftgate.core.redaction import install_redacting_filter, install_redacting_record_factory

__all__ = ["EXIT_FAILED", "EXIT_REGISTRY", "EXIT_USAGE", "ConfigOption", "setup_logging"]

ConfigOption = typer.Option(
    None,
    "--config",
    "-c",
    help="Project config file (default: ./driftgate.yaml, else embedded defaults).",
    dir_okay=False,
)

# The codes themselves live in the bottom layer, beside DriftgateError.
EXIT_FAILED = EXIT_CHECK_FAILED  # a check failed (gate, data contract, monitor)
EXIT_REGISTRY = EXIT_BACKEND  # the MLflow registry, a store or another server failed


def setup_logging(verbose: bool) -> None:
    """Log to stderr at INFO (DEBUG with ``verbose``), every record's credentials masked.

    Records are masked where they are made (a record factory), so those of every
    library (MLflow, SQLAlchemy, httpx, Prefect) are masked whichever handler writes
    them, including handlers the libraries attach later; the root handlers created
    here also carry the redacting filter. Warnings go through the same handlers.
    """
    import logging

    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        datefmt="%H:%M:%S",
    )
    install_redacting_record_factory()
    for handler in logging.getLogger().handlers:
        install_redacting_filter(handler)
    logging.captureWarnings(True)
    # MLflow and friends are chatty at INFO; keep driftgate's own progress visible.
    for noisy in ("mlflow", "alembic", "urllib3", "httpx", "great_expectations"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
