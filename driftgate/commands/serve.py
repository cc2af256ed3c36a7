"""``driftgate serve``, ``driftgate pause`` and ``driftgate resume``.

Plain functions, registered on the main app with ``app.command()(serve)`` etc.
``pause``/``resume`` write the durable switch in the control store directly (no
running service needed); a running service applies the change within
``serving.pause_poll_seconds``. Every change is recorded in the audit log.

Exit codes: 0 done (also when the switch already was in the asked position), 2 bad
usage or configuration.
"""

from __future__ import annotations

import getpass
import json
import logging
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from driftgate.commands.options import ConfigOption
from driftgate.core import collector

if TYPE_CHECKING:
    from driftgate.config import ProjectConfig

_ModelOption = typer.Option(None, "--model", "-m", help="Registered model name.")


def _config(config_path: Path | None, model: str | None = None) -> ProjectConfig:
    from driftgate.config import load_config, with_model_name

    return with_model_name(load_config(config_path), model)


def _control_store(config: ProjectConfig):
    from driftgate.serving.server import serving_settings
    from driftgate.stores.control import ControlStore

    settings = serving_settings(config)
    return ControlStore(
        settings.control_store(config.home_dir), sqlite_synchronous=settings.sqlite_synchronous
    )


def _default_actor() -> str:
    try:
        return f"cli:{getpass.getuser()}"
    except Exception:  # no user name in some containers
        return "cli"


def serve(
    host: str | None = typer.Option(None, help="Bind address (default: serving.host, loopback)."),
    port: int | None = typer.Option(None, help="Port (default: serving.port, 8080)."),
    config_path: Path | None = ConfigOption,
    verbose: bool = typer.Option(False, "--verbose", "-v"),
) -> None:
    """Serve models:/NAME@champion over HTTP; log every scored record to the sample store.

    The admin endpoints (/admin/pause, /admin/resume) need the bearer token from
    DRIFTGATE_ADMIN_TOKEN; without it they refuse every request.
    """
    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        datefmt="%H:%M:%S",
    )
    for noisy in ("mlflow", "alembic", "urllib3", "httpx"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    from driftgate.serving.server import run

    collector.for_the_service()  # the CLI's thresholds are for short commands
    run(_config(config_path), host=host, port=port, log_level="debug" if verbose else "info")


def pause(
    reason: str = typer.Option(..., "--reason", help="Why; shown to every refused client."),
    by: str | None = typer.Option(None, "--by", help="Who (default: cli:<user>)."),
    monitor: str | None = typer.Option(None, help="Monitor whose breach this is."),
    review_id: str | None = typer.Option(None, "--review-id", help="Review to resolve."),
    evidence: list[str] = typer.Option([], "--evidence", help="Link to evidence (repeatable)."),
    model: str | None = _ModelOption,
    config_path: Path | None = ConfigOption,
) -> None:
    """Pause inference: prediction requests get 503 naming the reason until `resume`."""
    config = _config(config_path, model)
    store = _control_store(config)
    try:
        change = store.pause(
            config.model.name,
            reason=reason,
            actor=by or _default_actor(),
            monitor=monitor,
            evidence=evidence,
            review_id=review_id,
        )
    finally:
        store.close()
    # A state stored before the switch bounded its fields may hold control characters:
    # shown() escapes them before they reach the terminal (found in review of issue 28).
    state = change.state.shown()
    if change.changed:
        typer.echo(f"inference of {state.model_name} PAUSED: {state.reason}")
    else:
        typer.echo(
            f"inference of {state.model_name} already paused since {state.since:%Y-%m-%d %H:%M:%S}"
            f" by {state.actor}: {state.reason} (kept; this request is in the audit log)"
        )


def resume(
    reason: str = typer.Option(..., "--reason", help="Why it is safe to serve again."),
    by: str | None = typer.Option(None, "--by", help="Who (default: cli:<user>)."),
    model: str | None = _ModelOption,
    config_path: Path | None = ConfigOption,
    show_log: bool = typer.Option(False, "--log", help="Print the recent audit log as JSON."),
) -> None:
    """Resume inference after a pause; recorded in the audit log with the pause it ends."""
    config = _config(config_path, model)
    store = _control_store(config)
    try:
        change = store.resume(config.model.name, reason=reason, actor=by or _default_actor())
        events = store.events(config.model.name, limit=10) if show_log else []
    finally:
        store.close()
    if change.changed:
        ended = change.event
        typer.echo(
            f"inference of {config.model.name} resumed ({reason}); "
            f"it was paused for: {_paused_for(ended)}"
        )
    else:
        typer.echo(f"inference of {config.model.name} is not paused; nothing to resume")
    for event in events:
        typer.echo(json.dumps(event.to_dict()))


def _paused_for(event) -> str:
    parts = [f"monitor {event.monitor}"] if event.monitor else []
    if event.review_id:
        parts.append(f"review {event.review_id}")
    return ", ".join(parts) or "a manual pause"
