"""The inference service: ``create_app(config)`` builds the FastAPI application.

Endpoints (see docs/serving.md), one router per concern under :mod:`serving.routers`:
- ``POST /predict`` (:mod:`.routers.predict`): validate → predict → commit the samples
  → answer. 422 names the broken fields (400 when the body is not readable JSON, 413
  when it is too large); 503 while paused (with the reason and review), without a
  champion, or when the sample store cannot take the samples (then nothing was
  acknowledged).
- ``GET /healthz`` (the process answers), ``GET /readyz`` (a champion is loaded and
  both stores answer), ``GET /metrics`` (Prometheus text format): :mod:`.routers.health`.
- ``POST /admin/pause``, ``POST /admin/resume``, ``GET /admin/state``
  (:mod:`.routers.admin`): bearer token from the environment
  (``DRIFTGATE_ADMIN_TOKEN``); 401 without one, 403 if wrong.
- ``POST /feedback`` (:mod:`.routers.feedback`): delayed labels of served records,
  joined by request id and record index; 404 unknown ids, 409 conflicting labels, 422
  wrong label types or beyond ``serving.label_horizon``; the admin token or a
  ``serving.label_sources`` token, whose source is stored with each label, unless
  ``serving.feedback_auth: none`` (then, without a token, source ``unverified``).

Nothing happens at import or in ``create_app``: stores are opened, the champion is
loaded and the background threads start in the app's lifespan
(:func:`serving.state.open_service`), before the server accepts its first connection.
Request and response bodies are in :mod:`serving.schemas`, the error format in
:mod:`serving.responses`.
"""

from __future__ import annotations

import contextlib
import inspect

from fastapi import FastAPI, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.exception_handlers import http_exception_handler
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException

from driftgate.config import ProjectConfig
from driftgate.config.serving import ServingSettings
from driftgate.serving.dependencies import AuthError
from driftgate.serving.jsonbody import CappedValidationError
from driftgate.serving.limits import BodyLimitMiddleware
from driftgate.serving.metrics import MetricsMiddleware, ServiceMetrics
from driftgate.serving.responses import (
    SafeJSONResponse,
    body_error,
    capped,
    error_response,
    field_of,
    request_id_of,
    unreadable_reason,
)
from driftgate.serving.routers import admin, feedback, health, predict
from driftgate.serving.state import close_service, open_service
from driftgate.stores.control import ControlValueError


def create_app(config: ProjectConfig, settings: ServingSettings | None = None) -> FastAPI:
    """The service for ``config.model.name`` with ``settings`` (default: the config's
    ``serving`` section, else defaults). The admin token is read from the environment
    variable ``settings.admin_token_env`` when the app starts."""
    settings = settings or getattr(config, "serving", None) or ServingSettings()
    # serving.contract pins a file; otherwise the project's contract in effect, read
    # again at each champion poll: a revision a person accepts is picked up live.
    pinned = config.resolve(settings.contract) if settings.contract else None
    contract_path = (lambda: pinned) if pinned else config.contract_in_effect
    metrics = ServiceMetrics()

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI):
        state = await run_in_threadpool(open_service, config, settings, contract_path, metrics)
        app.state.service = state
        try:
            yield
        finally:
            await run_in_threadpool(close_service, state)

    app = FastAPI(
        **_telemetry(settings.opentelemetry),
        title="driftgate inference",
        summary=f"Serves models:/{config.model.name}@champion and logs every sample.",
        lifespan=lifespan,
        default_response_class=SafeJSONResponse,
        # The API's own description is for people building against it, not for every
        # client of a production service (issue 28): off unless serving.api_docs.
        docs_url="/docs" if settings.api_docs else None,
        redoc_url="/redoc" if settings.api_docs else None,
        openapi_url="/openapi.json" if settings.api_docs else None,
    )

    def too_large(scope: dict, limit: int) -> JSONResponse:
        if scope["path"] == "/predict":
            metrics.invalid_records.inc()
        which = (
            "the admin body limit" if scope["path"].startswith(admin.PREFIX)
            else "serving.max_body_bytes"
        )  # fmt: skip
        return body_error(
            request_id_of(Request(scope)),
            f"larger than {limit} bytes ({which})",
            status=413,
            detail="request body too large",
        )

    # Innermost: past the body limit and the metrics, /predict skips the router.
    app.add_middleware(predict.PredictFastPath, exception_handlers=app.exception_handlers)
    # Inside the metrics middleware, so that refused bodies are counted too.
    app.add_middleware(
        BodyLimitMiddleware,
        max_bytes=settings.max_body_bytes,
        refuse=too_large,
        path_limits={admin.PREFIX: admin.MAX_BODY_BYTES},
    )

    def log_request(path: str, status: int, seconds: float, scope: dict) -> None:
        service = getattr(app.state, "service", None)
        if path == "/predict" and service is not None and service.requests is not None:
            # The handler leaves the request's event time in its state (replays).
            event_time = (scope.get("state") or {}).get("event_time")
            service.requests.add(status, seconds, event_time)

    app.add_middleware(MetricsMiddleware, metrics=metrics, on_request=log_request)
    _add_error_handlers(app, metrics)
    for router in (predict.router, health.router, admin.router, feedback.router):
        app.include_router(router)
    return app


def _telemetry(enabled: bool) -> dict:
    """FastAPI's ``telemetry`` argument for ``serving.opentelemetry``: FastAPI's defaults
    when on; off, every signal off, so that no request asks OpenTelemetry whether a
    provider is configured (three registry and environment look-ups each). FastAPI
    before 0.150 has no native telemetry and takes no such argument."""
    if enabled or "telemetry" not in inspect.signature(FastAPI.__init__).parameters:
        return {}
    return {"telemetry": {"tracing": False, "metrics": False, "logs": False}}


def _add_error_handlers(app: FastAPI, metrics: ServiceMetrics) -> None:
    """Every refusal in the service's error format, counted when it is a /predict one."""

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(request: Request, exc: StarletteHTTPException) -> Response:
        if exc.status_code == 400 and exc.__cause__ is not None:
            # FastAPI's "error parsing the body": say which error, in the service's format.
            if request.url.path == "/predict":
                metrics.invalid_records.inc()
            return body_error(request_id_of(request), unreadable_reason(exc.__cause__))
        return await http_exception_handler(request, exc)

    @app.exception_handler(RequestValidationError)
    async def _invalid_request(request: Request, exc: RequestValidationError) -> JSONResponse:
        problems = exc.errors()
        if request.url.path == "/predict":
            metrics.invalid_records.inc()
        syntax = next((e for e in problems if e.get("type") == "json_invalid"), None)
        if syntax is not None:
            where = syntax.get("loc", ("body", "?"))[-1]
            reason = (syntax.get("ctx") or {}).get("error", "JSON decode error")
            return body_error(request_id_of(request), f"not valid JSON: {reason} (at {where})")
        reasons: dict[tuple, list[str]] = {}
        for error in problems:
            reasons.setdefault(field_of(tuple(error.get("loc", ()))), []).append(error["msg"])
        errors = [
            {"record": record, "field": field, "reason": "; ".join(dict.fromkeys(messages))}
            for (record, field), messages in reasons.items()
        ]
        # Fields whose errors were not kept count as one each (a lower bound).
        dropped = exc.total - len(problems) if isinstance(exc, CappedValidationError) else 0
        return error_response(
            422, "invalid request", request_id_of(request), **capped(errors, len(errors) + dropped)
        )

    app.add_exception_handler(admin.ControlStoreUnavailable, admin.control_unavailable)
    app.add_exception_handler(ControlValueError, admin.control_refused)

    @app.exception_handler(AuthError)
    async def _auth_failed(request: Request, exc: AuthError) -> JSONResponse:
        headers = {"WWW-Authenticate": "Bearer"} if exc.status == 401 else None
        return SafeJSONResponse({"detail": exc.detail}, status_code=exc.status, headers=headers)
