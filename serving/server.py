"""Run the service under uvicorn (``driftgate serve``)."""

from __future__ import annotations

from driftgate.config import ProjectConfig
from driftgate.config.serving import ServingSettings

# SIGTERM/SIGINT: stop accepting, finish in-flight requests, then the lifespan drains
# the sample queue. Requests still running after this many seconds are cut off
# (unanswered, so nothing acknowledged is lost).
GRACEFUL_SHUTDOWN_SECONDS = 15


def serving_settings(config: ProjectConfig) -> ServingSettings:
    """The config's ``serving`` section, or the defaults while it has none."""
    return getattr(config, "serving", None) or ServingSettings()


def run(
    config: ProjectConfig,
    settings: ServingSettings | None = None,
    *,
    host: str | None = None,
    port: int | None = None,
    log_level: str = "info",
) -> None:
    """Serve until interrupted; ``host``/``port`` override the settings."""
    import uvicorn
    from driftgate.serving.app import create_app

    settings = settings or serving_settings(config)
    uvicorn.run(
        create_app(config, settings),
        host=host if host is not None else settings.host,
        port=port if port is not None else settings.port,
        log_level=log_level,
        access_log=False,  # per-request logs would cost more than the request; see /metrics
        timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_SECONDS,
        lifespan="on",
    )
