"""The inference service: ``create_app(config)`` builds the FastAPI application.

Endpoints (see docs/serving.md):
- ``POST /predict``: validate → predict → commit the samples → answer. 422 names the
  broken fields (400 when the body is not readable JSON, 413 when it is too large);
  503 while paused (with the reason and review), without a champion, or when the
  sample store cannot take the samples (then nothing was acknowledged).
- ``GET /healthz`` (the process answers), ``GET /readyz`` (a champion is loaded and
  both stores answer), ``GET /metrics`` (Prometheus text format).
- ``POST /admin/pause``, ``POST /admin/resume``, ``GET /admin/state``: bearer token
  from the environment (``DRIFTGATE_ADMIN_TOKEN``); 401 without one, 403 if wrong.

Nothing happens at import or in ``create_app``: stores are opened, the champion is
loaded and the background threads start in the app's lifespan, before the server
accepts its first connection.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
import logging
import os
import re
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Annotated, Any

import numpy as np
from driftgate.serving.champion import ChampionWatcher, LoadedModel
from driftgate.serving.limits import BodyLimitMiddleware
from driftgate.serving.metrics import MetricsMiddleware, ServiceMetrics
from driftgate.serving.pause import PauseSwitchView
from driftgate.serving.validation import build_checker
from driftgate.serving.writer import GroupCommitWriter, WriterClosed, WriterOverloaded
from fastapi import Depends, FastAPI, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.exception_handlers import http_exception_handler
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from fastapi.routing import APIRoute
from pydantic import (
    AwareDatetime,
    BaseModel,
    ConfigDict,
    Field,
    StrictFloat,
    StrictInt,
    field_validator,
)
from starlette.exceptions import HTTPException as StarletteHTTPException

from driftgate.config import ProjectConfig
from driftgate.config.serving import ServingSettings
from driftgate.core.redaction import redact_credentials
from driftgate.stores.control import ControlStore
from driftgate.stores.samples import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, Sample, SqlSampleStore

log = logging.getLogger(__name__)

REQUEST_ID_HEADER = "X-Request-ID"
_REQUEST_ID = re.compile(r"^[A-Za-z0-9._:\-]{1,128}$")
# Above this many records, scoring moves off the event loop so it cannot stall it.
_INLINE_RECORDS = 64
SAMPLE_STORED_HEADER = "X-Driftgate-Sample-Stored"
# An acknowledgement waits at most this long for its commit before answering 503.
_COMMIT_TIMEOUT_SECONDS = 30.0

FeatureValue = StrictFloat | StrictInt | None


class PredictRequest(BaseModel):
    """``{"records": [{feature: number, ...}, ...], "timestamp": optional}``."""

    model_config = ConfigDict(extra="forbid")

    records: list[dict[str, FeatureValue]] = Field(min_length=1)
    timestamp: AwareDatetime | None = Field(
        None, description="event time of the records (only if the service accepts it)"
    )

    @field_validator("timestamp", mode="before")
    @classmethod
    def _text_only(cls, value: Any) -> Any:
        # pydantic would read a number (or true) as Unix time, guessing s or ms.
        if value is not None and not isinstance(value, str):
            raise ValueError("must be an ISO 8601 string with a time zone")
        return value

    @field_validator("timestamp")
    @classmethod
    def _storable(cls, value: datetime | None) -> datetime | None:
        # Refused here, not by the store: one unstorable sample would fail the whole
        # group commit, other clients' requests included.
        if value is not None and not EARLIEST_TIMESTAMP <= value < LATEST_TIMESTAMP:
            raise ValueError(
                f"must lie in [{EARLIEST_TIMESTAMP:%Y-%m-%d}, {LATEST_TIMESTAMP:%Y-%m-%d}) UTC"
            )
        return value


class PredictResponse(BaseModel):
    request_id: str
    model_name: str
    model_version: str
    probabilities: list[float]
    classes: list[int]


class PauseRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    reason: str = Field(min_length=1, max_length=5000)
    by: str | None = Field(None, max_length=256, description="who; default http:<client>")
    monitor: str | None = Field(None, max_length=256)
    window_start: datetime | None = None
    window_end: datetime | None = None
    evidence: list[str] = Field(default_factory=list)
    review_id: str | None = Field(None, max_length=256)


class ResumeRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    reason: str = Field(min_length=1, max_length=5000)
    by: str | None = Field(None, max_length=256)


@dataclass
class ServiceState:
    """Everything the lifespan opens; handlers read it from ``app.state.service``."""

    settings: ServingSettings
    model_name: str
    metrics: ServiceMetrics
    samples: SqlSampleStore
    control: ControlStore
    champion: ChampionWatcher
    pause: PauseSwitchView
    writer: GroupCommitWriter
    admin_token: str | None


async def _service(request: Request) -> ServiceState:
    # async: a plain def dependency would run in the thread pool on every request.
    return request.app.state.service


# Module level: with postponed annotations FastAPI resolves these names in the module.
Service = Annotated[ServiceState, Depends(_service)]


class SafeJSONResponse(JSONResponse):
    """JSON with every non-ASCII character escaped.

    Error responses echo field names from the request, and a JSON ``\\ud800`` escape
    decodes to an unpaired surrogate, which UTF-8 cannot encode: Starlette's
    ``JSONResponse`` would fail (a 500) where this writes the escape back.
    """

    def render(self, content: Any) -> bytes:
        return json.dumps(
            content, ensure_ascii=True, allow_nan=False, separators=(",", ":")
        ).encode("ascii")


def _error(
    status: int, detail: str, request_id: str | None = None, **extra: Any
) -> SafeJSONResponse:
    body = {"detail": detail, **extra}
    headers = {REQUEST_ID_HEADER: request_id} if request_id else None
    if request_id:
        body["request_id"] = request_id
    return SafeJSONResponse(body, status_code=status, headers=headers)


def _body_error(request_id: str, reason: str, status: int = 400, detail: str = "") -> JSONResponse:
    """The request body cannot be read as JSON at all (or is too large)."""
    return _error(
        status,
        detail or "request body is not readable JSON",
        request_id,
        errors=[{"record": None, "field": "body", "reason": reason}],
    )


def _unreadable_reason(cause: BaseException | None) -> str:
    """Why FastAPI could not decode a body (it raises a bare 400 from the cause)."""
    if isinstance(cause, UnicodeDecodeError):
        return f"not valid UTF-8 ({cause.reason} at byte {cause.start})"
    if isinstance(cause, RecursionError):
        return "JSON nested too deeply"
    if isinstance(cause, ValueError):  # e.g. an integer past Python's 4300-digit limit
        return f"not valid JSON: {cause}"
    return "not valid JSON"


def _unicode_json(body: bytes) -> Any:
    """``json.loads(body)``, refusing text that is not Unicode.

    JSON may spell an unpaired surrogate (``"\\ud800"``); Python decodes it to a
    string no UTF-8 store or log can hold, and pydantic reports it under a mangled
    name. Such a body is refused whole (400, field ``body``). Syntax errors propagate
    as ``JSONDecodeError``.
    """
    data = json.loads(body)
    stack = [data]
    while stack:
        value = stack.pop()
        if isinstance(value, dict):
            stack.extend(value.keys())
            stack.extend(value.values())
        elif isinstance(value, list):
            stack.extend(value)
        elif isinstance(value, str):
            try:
                value.encode("utf-8")
            except UnicodeEncodeError as exc:
                bad = value[exc.start : exc.end].encode("unicode_escape").decode()
                raise ValueError(f"text holds an unpaired surrogate ({bad})") from None
    return data


class _UnicodeJSONRequest(Request):
    async def json(self) -> Any:
        if not hasattr(self, "_json"):
            self._json = _unicode_json(await self.body())
        return self._json


class _UnicodeJSONRoute(APIRoute):
    """FastAPI's documented hook for a custom request class: bodies parse with
    :func:`_unicode_json`; a ValueError becomes FastAPI's 400, which the app's handler
    turns into the service's error format."""

    def get_route_handler(self):
        handler = super().get_route_handler()

        async def unicode_json_handler(request: Request) -> Response:
            return await handler(_UnicodeJSONRequest(request.scope, request.receive))

        return unicode_json_handler


def _request_id(request: Request) -> str:
    given = request.headers.get(REQUEST_ID_HEADER)
    return given if given and _REQUEST_ID.match(given) else uuid.uuid4().hex


def _field_of(location: tuple) -> tuple[int | None, str]:
    """``("body", "records", 3, "temperature")`` -> ``(3, "temperature")``."""
    # Only the leading "body": a record may well have a field called "body".
    parts = list(location[1:] if location[:1] == ("body",) else location)
    if len(parts) >= 2 and parts[0] == "records" and isinstance(parts[1], int):
        # Further parts name the union member that failed ("temperature.float"): drop them.
        return parts[1], str(parts[2]) if len(parts) > 2 else "records"
    # A field may be called "" (a JSON key can be empty): name it as it is.
    return None, ".".join(str(p) for p in parts) if parts else "body"


def create_app(config: ProjectConfig, settings: ServingSettings | None = None) -> FastAPI:
    """The service for ``config.model.name`` with ``settings`` (default: the config's
    ``serving`` section, else defaults). The admin token is read from the environment
    variable ``settings.admin_token_env`` when the app starts."""
    settings = settings or getattr(config, "serving", None) or ServingSettings()
    model_name = config.model.name
    home = config.home_dir
    contract_path = config.resolve(settings.contract) if settings.contract else config.data.contract
    metrics = ServiceMetrics()

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI):
        state = await run_in_threadpool(
            _open_service, config, settings, model_name, home, contract_path, metrics
        )
        app.state.service = state
        try:
            yield
        finally:
            await run_in_threadpool(_close_service, state)

    app = FastAPI(
        title="driftgate inference",
        summary=f"Serves models:/{model_name}@champion and logs every sample.",
        lifespan=lifespan,
        default_response_class=SafeJSONResponse,
    )
    app.router.route_class = _UnicodeJSONRoute  # before the routes are declared

    def too_large(scope: dict, limit: int) -> JSONResponse:
        if scope["path"] == "/predict":
            metrics.invalid_records.inc()
        return _body_error(
            _request_id(Request(scope)),
            f"larger than {limit} bytes (serving.max_body_bytes)",
            status=413,
            detail="request body too large",
        )

    # Inside the metrics middleware, so that refused bodies are counted too.
    app.add_middleware(BodyLimitMiddleware, max_bytes=settings.max_body_bytes, refuse=too_large)
    app.add_middleware(MetricsMiddleware, metrics=metrics)

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(request: Request, exc: StarletteHTTPException) -> Response:
        if exc.status_code == 400 and exc.__cause__ is not None:
            # FastAPI's "error parsing the body": say which error, in the service's format.
            if request.url.path == "/predict":
                metrics.invalid_records.inc()
            return _body_error(_request_id(request), _unreadable_reason(exc.__cause__))
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
            return _body_error(_request_id(request), f"not valid JSON: {reason} (at {where})")
        reasons: dict[tuple, list[str]] = {}
        for error in problems:
            reasons.setdefault(_field_of(tuple(error.get("loc", ()))), []).append(error["msg"])
        errors = [
            {"record": record, "field": field, "reason": "; ".join(dict.fromkeys(messages))}
            for (record, field), messages in reasons.items()
        ]
        return _error(422, "invalid request", _request_id(request), errors=errors)

    @app.post("/predict", response_model=PredictResponse)
    async def predict(body: PredictRequest, request: Request, svc: Service):
        request_id = _request_id(request)
        pause = svc.pause.current()
        if pause.paused:
            metrics.paused_requests.inc()
            return _error(503, "inference paused", request_id, paused=True, **_pause_fields(pause))
        model = svc.champion.current
        if model is None:
            return _error(503, svc.champion.last_error or "no champion loaded", request_id)
        if len(body.records) > settings.max_records_per_request:
            return _error(
                422,
                f"{len(body.records)} records; at most {settings.max_records_per_request}",
                request_id,
                errors=[{"record": None, "field": "records", "reason": "too many records"}],
            )
        if body.timestamp is not None and not settings.accept_client_timestamps:
            return _error(
                422,
                "client timestamps are not accepted by this service",
                request_id,
                errors=[{"record": None, "field": "timestamp", "reason": "not accepted"}],
            )
        errors = [
            {"record": i, "field": e.field, "reason": e.reason, "rule": e.rule}
            for i, record in enumerate(body.records)
            for e in model.checker.validate(record)
        ]
        if errors:
            metrics.invalid_records.inc(len({e["record"] for e in errors}))
            return _error(422, "request breaks the input contract", request_id, errors=errors)

        matrix = np.array(
            [[record[f] for f in model.features] for record in body.records], dtype=np.float32
        )
        if len(body.records) > _INLINE_RECORDS:
            probabilities = await run_in_threadpool(model.predict, matrix)
        else:
            probabilities = model.predict(matrix)
        if probabilities.shape != (len(body.records),) or not np.isfinite(probabilities).all():
            log.error(
                "model v%s returned unusable output for request %s", model.version, request_id
            )
            return _error(500, "the model returned a non-finite or misshapen output", request_id)
        classes = (probabilities >= settings.decision_threshold).astype(int)

        received = datetime.now(UTC)
        samples = _samples(model, body, request_id, received, probabilities, classes)
        try:
            committed = svc.writer.submit(samples)
        except (WriterOverloaded, WriterClosed) as exc:
            return _error(503, f"not accepting samples: {exc}", request_id)
        stored = True
        try:
            await asyncio.wait_for(asyncio.wrap_future(committed), _COMMIT_TIMEOUT_SECONDS)
        except Exception as exc:  # store down, timeout: the samples are not recorded
            reason = redact_credentials(f"sample store unavailable: {exc}")
            if settings.on_store_failure == "fail_closed":
                return _error(
                    503,
                    f"{reason}; request not answered because it could not be recorded "
                    "(serving.on_store_failure=fail_closed)",
                    request_id,
                )
            # answer_unlogged: the operator chose availability over monitoring; the
            # answer, a header, a counter and the log all say the sample is missing.
            log.warning("request %s answered but not stored: %s", request_id, reason)
            metrics.unstored_records.inc(len(samples))
            stored = False
        if stored:
            metrics.records.inc(len(samples))
        return SafeJSONResponse(
            {
                "request_id": request_id,
                "model_name": model.name,
                "model_version": model.version,
                "probabilities": probabilities.tolist(),
                "classes": classes.tolist(),
                "sample_stored": stored,
            },
            headers={REQUEST_ID_HEADER: request_id, SAMPLE_STORED_HEADER: str(stored).lower()},
        )

    @app.get("/healthz")
    async def healthz() -> dict:
        return {"status": "ok"}

    @app.get("/readyz")
    async def readyz(svc: Service):
        problems = await run_in_threadpool(_readiness_problems, svc)
        model = svc.champion.current
        body = {
            "ready": not problems,
            "model_name": svc.model_name,
            "model_version": model.version if model else None,
            "paused": svc.pause.current().paused,
            "problems": problems,
        }
        return SafeJSONResponse(body, status_code=200 if not problems else 503)

    @app.get("/metrics")
    async def metrics_endpoint() -> Response:
        return Response(metrics.render(), media_type=metrics.content_type)

    async def require_admin(request: Request, svc: Service) -> None:
        header = request.headers.get("authorization", "")
        scheme, _, token = header.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise _AuthError(401, "admin endpoints need 'Authorization: Bearer <token>'")
        expected = svc.admin_token
        # compare_digest: the comparison time does not reveal how much of a guess matched.
        if not expected or not hmac.compare_digest(token.strip().encode(), expected.encode()):
            raise _AuthError(403, "admin token refused")

    @app.exception_handler(_AuthError)
    async def _auth_failed(request: Request, exc: _AuthError) -> JSONResponse:
        headers = {"WWW-Authenticate": "Bearer"} if exc.status == 401 else None
        return SafeJSONResponse({"detail": exc.detail}, status_code=exc.status, headers=headers)

    Admin = Depends(require_admin)

    @app.post("/admin/pause", dependencies=[Admin])
    async def admin_pause(body: PauseRequest, request: Request, svc: Service) -> dict:
        change = await run_in_threadpool(
            lambda: svc.control.pause(
                svc.model_name,
                reason=body.reason,
                actor=body.by or _client_actor(request),
                monitor=body.monitor,
                window_start=body.window_start,
                window_end=body.window_end,
                evidence=body.evidence,
                review_id=body.review_id,
            )
        )
        svc.pause.set(change.state)
        return _change_body(change)

    @app.post("/admin/resume", dependencies=[Admin])
    async def admin_resume(body: ResumeRequest, request: Request, svc: Service) -> dict:
        change = await run_in_threadpool(
            lambda: svc.control.resume(
                svc.model_name, reason=body.reason, actor=body.by or _client_actor(request)
            )
        )
        svc.pause.set(change.state)
        return _change_body(change)

    @app.get("/admin/state", dependencies=[Admin])
    async def admin_state(svc: Service, limit: int = 20) -> dict:
        state = await run_in_threadpool(svc.pause.refresh)
        events = await run_in_threadpool(
            svc.control.events, svc.model_name, max(1, min(limit, 500))
        )
        return {"state": state.to_dict(), "events": [e.to_dict() for e in events]}

    return app


class _AuthError(Exception):
    def __init__(self, status: int, detail: str) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail


def _client_actor(request: Request) -> str:
    return f"http:{request.client.host if request.client else 'unknown'}"


def _pause_fields(pause) -> dict:
    data = pause.to_dict()
    return {
        key: data[key]
        for key in (
            "reason", "review_id", "monitor", "window_start", "window_end", "evidence",
            "actor", "since",
        )
    }  # fmt: skip


def _change_body(change) -> dict:
    return {
        "changed": change.changed,
        "state": change.state.to_dict(),
        "event": change.event.to_dict() if change.event else None,
    }


def _samples(
    model: LoadedModel,
    body: PredictRequest,
    request_id: str,
    received: datetime,
    probabilities: np.ndarray,
    classes: np.ndarray,
) -> list[Sample]:
    timestamp = body.timestamp or received
    return [
        Sample(
            timestamp=timestamp,
            received_at=received,
            request_id=request_id,
            record_index=i,
            model_name=model.name,
            model_version=model.version,
            features=record,
            prediction=float(probabilities[i]),
            predicted_class=int(classes[i]),
        )
        for i, record in enumerate(body.records)
    ]


def _readiness_problems(svc: ServiceState) -> list[str]:
    problems = []
    if svc.champion.current is None:
        problems.append(svc.champion.last_error or "no champion loaded")
    if not svc.writer.alive:
        problems.append("the sample writer is not running")
    for name, store in (("sample store", svc.samples), ("control store", svc.control)):
        try:
            store.ping()
        except Exception as exc:
            problems.append(redact_credentials(f"{name} unreachable: {exc}"))
    if svc.pause.last_error:
        problems.append(svc.pause.last_error)
    return problems


def _open_service(
    config: ProjectConfig,
    settings: ServingSettings,
    model_name: str,
    home,
    contract_path,
    metrics: ServiceMetrics,
) -> ServiceState:
    """Open the stores, read the switch, load the champion, start the threads."""
    samples = SqlSampleStore(
        settings.sample_store(home), sqlite_synchronous=settings.sqlite_synchronous
    )
    control = ControlStore(
        settings.control_store(home), sqlite_synchronous=settings.sqlite_synchronous
    )

    def on_pause_change(state) -> None:
        metrics.paused.set(1 if state.paused else 0)
        if state.paused:
            metrics.pauses.inc()

    pause = PauseSwitchView(control, model_name, settings.pause_poll_seconds, on_pause_change)
    pause.start()  # before the first request: a stored pause holds from the start

    def on_reload(outcome: str, version: str) -> None:
        metrics.model_reloads.labels(outcome).inc()
        if outcome == "loaded" and version.isdigit():
            metrics.model_version.set(int(version))

    champion = ChampionWatcher(
        config.tracking,
        model_name,
        make_checker=lambda features: build_checker(features, contract_path),
        poll_seconds=settings.model_poll_seconds,
        on_reload=on_reload,
    )
    champion.refresh()
    champion.start()

    writer = GroupCommitWriter(
        samples.append,
        max_batch_samples=settings.batch_max_samples,
        max_wait_seconds=settings.batch_max_wait_ms / 1000,
        max_pending_requests=settings.max_pending_requests,
        on_commit=metrics.record_commit,
        on_error=lambda exc: metrics.sample_write_errors.inc(),
    )
    writer.start()
    token = os.environ.get(settings.admin_token_env) or None
    if token is None:
        log.warning("%s is not set: admin endpoints refuse every request", settings.admin_token_env)
    return ServiceState(
        settings=settings,
        model_name=model_name,
        metrics=metrics,
        samples=samples,
        control=control,
        champion=champion,
        pause=pause,
        writer=writer,
        admin_token=token,
    )


def _close_service(state: ServiceState) -> None:
    """Stop polling, commit every queued sample, close the stores."""
    state.champion.stop()
    state.pause.stop()
    state.writer.close()
    state.samples.close()
    state.control.close()
