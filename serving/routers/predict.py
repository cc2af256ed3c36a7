"""``POST /predict``: validate → predict → commit the samples → answer."""

from __future__ import annotations

import asyncio
import functools
import inspect
import logging
from collections.abc import Mapping
from datetime import UTC, datetime

from fastapi import APIRouter, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import Response

from driftgate.serving.champion import LoadedModel
from driftgate.serving.errors import describe_error, new_error_id
from driftgate.serving.jsonbody import (
    TooManyRecords,
    UnicodeJSONRequest,
    UnicodeJSONRoute,
    read_body,
)
from driftgate.serving.outputs import Scored, score, usable
from driftgate.serving.rejected import (
    minute_of,
    overflow_item,
    rejected_row_bytes,
    rejected_samples,
)
from driftgate.serving.responses import (
    MAX_ERRORS,
    REQUEST_ID_HEADER,
    SAMPLE_STORED_HEADER,
    RawJSONResponse,
    capped,
    error_response,
    json_bytes,
    request_id_of,
)
from driftgate.serving.schemas import PredictRequest, PredictResponse, plain_predict_request
from driftgate.serving.state import ServiceState
from driftgate.serving.writer import WriterClosed, WriterOverloaded
from driftgate.stores._sql import StoreReplaced
from driftgate.stores.control import MAX_EVIDENCE_LINKS, PauseState
from driftgate.stores.samples import DuplicateRequestIds, Sample

log = logging.getLogger(__name__)

# Above this many records, scoring moves off the event loop so it cannot stall it.
INLINE_RECORDS = 64
# An acknowledgement waits at most this long for its commit before answering 503.
COMMIT_TIMEOUT_SECONDS = 30.0

router = APIRouter(route_class=UnicodeJSONRoute)


@router.post(
    "/predict",
    response_model=PredictResponse,
    # The body is read by read_body (off the event loop when large), not by FastAPI:
    # its schema is declared here for the OpenAPI document.
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {"application/json": {"schema": PredictRequest.model_json_schema()}},
        }
    },
)
async def predict(request: Request):
    # The state straight from the app, not through the Service dependency: FastAPI's
    # dependency resolution was a tenth of the request's CPU (request_path_bench).
    svc: ServiceState = request.app.state.service
    settings, metrics = svc.settings, svc.metrics
    request_id = request_id_of(request)
    try:
        body = await read_body(
            request, PredictRequest, settings.max_records_per_request, plain_predict_request
        )
    except TooManyRecords as exc:
        metrics.invalid_records.inc()
        return error_response(
            422,
            f"{exc.count} records; at most {settings.max_records_per_request}",
            request_id,
            errors=[{"record": None, "field": "records", "reason": "too many records"}],
        )
    if body.timestamp is not None and settings.accept_client_timestamps:
        request.state.event_time = body.timestamp  # the requests log's event time (replays)
    pause = svc.pause.current()
    if pause.paused:
        metrics.paused_requests.inc()
        return error_response(503, "inference paused", request_id, **_pause_fields(pause))
    if svc.pause.unknown:
        return error_response(503, f"the pause switch is unknown: {svc.pause.unknown}", request_id)
    model = svc.champion.current
    if model is None:
        return error_response(503, svc.champion.last_error or "no champion loaded", request_id)
    if body.timestamp is not None and not settings.accept_client_timestamps:
        return error_response(
            422,
            "client timestamps are not accepted by this service",
            request_id,
            errors=[{"record": None, "field": "timestamp", "reason": "not accepted"}],
        )
    large = len(body.records) > INLINE_RECORDS
    # An integer code sent for a text category is read as its text (see validation).
    body.records = model.checker.normalise(body.records)
    if large:  # validation of a large request must not stall the event loop
        errors, total, invalid, broken = await run_in_threadpool(
            _broken_fields, model, body.records
        )
    else:
        errors, total, invalid, broken = _broken_fields(model, body.records)
    if errors:
        metrics.invalid_records.inc(invalid)
        client = svc.client_key(client_identity(request, settings.client_id_header))
        stored = await _store_rejected(svc, model, body, request_id, broken, client)
        response = error_response(
            422,
            "request breaks the input contract",
            request_id,
            **capped(errors, total),
            **({} if stored is None else {"sample_stored": stored}),
        )
        if stored is not None:
            response.headers[SAMPLE_STORED_HEADER] = str(stored).lower()
        return response

    matrix = model.encode(body.records)
    if large:
        outputs = await run_in_threadpool(model.predict, matrix)
    else:
        outputs = model.predict(matrix)
    if not usable(outputs, model.task, len(body.records), len(model.classes)):
        log.error("model v%s returned unusable output for request %s", model.version, request_id)
        return error_response(
            500, "the model returned a non-finite or misshapen output", request_id
        )
    scored = score(outputs, model.task, model.classes, settings.decision_threshold)

    received = datetime.now(UTC)
    fraction = settings.sample_fraction
    sampled = svc.sampling.keeps(request_id)
    client = svc.client_key(client_identity(request, settings.client_id_header))
    samples = _samples(model, body, request_id, received, scored, fraction, client)
    if not sampled and not svc.unlogged.claim(request_id):
        return _reused_id(request_id)  # else every copy of an unlogged id would be skipped
    # Not sampled (serving.sample_fraction): answered at once, nothing to make durable.
    failure = await _store(svc, samples, request_id) if sampled else None
    if isinstance(failure, Response):
        return failure
    stored = sampled and failure is None
    if not sampled:
        metrics.records.inc(len(samples))
        metrics.unsampled_records.inc(len(samples))
    elif stored:
        metrics.records.inc(len(samples))
    elif settings.on_store_failure == "fail_closed":
        return error_response(
            503,
            f"{failure}; request not answered because it could not be recorded "
            "(serving.on_store_failure=fail_closed)",
            request_id,
            **({"error_id": failure.error_id} if failure.error_id else {}),
        )
    else:
        # answer_unlogged: the operator chose availability over monitoring; the
        # answer, a header, a counter and the log all say the sample is missing.
        log.warning("request %s answered but not stored: %s", request_id, failure)
        metrics.unstored_records.inc(len(samples))
    # Bytes straight from the answer (its numbers are finite: usable() checked them).
    answer = json_bytes(
        {
            "request_id": request_id,
            "model_name": model.name,
            "model_version": model.version,
            **({"task": model.task} if model.task != "binary" else {}),
            **scored.fields,
            "sample_stored": stored,
            **({} if fraction >= 1.0 else {"sampled": sampled}),
        }
    )
    return RawJSONResponse(
        answer,
        [
            (REQUEST_ID_HEADER_RAW, request_id.encode("latin-1")),
            (SAMPLE_STORED_HEADER_RAW, b"true" if stored else b"false"),
        ],
    )


# The answer's own headers as raw pairs (lower case, as Starlette sends every header).
REQUEST_ID_HEADER_RAW = REQUEST_ID_HEADER.lower().encode("latin-1")
SAMPLE_STORED_HEADER_RAW = SAMPLE_STORED_HEADER.lower().encode("latin-1")


class PredictFastPath:
    """ASGI middleware: ``POST /predict`` goes straight to :func:`predict`.

    Why: Starlette's exception middleware, FastAPI's router (matching every route in
    turn) and its endpoint wrapper (dependency resolution) were about a third of the
    event loop's CPU per request (benchmarks/request_path_bench.py), for a route that
    needs none of them: it reads its own body and returns a finished Response. An
    exception it raises gets the app's own handler (``exception_handlers``, looked up
    along the exception's classes as Starlette does), so every refusal keeps the
    service's error format. Every other request, ``/predict`` with another method
    included, takes the app's usual path. Installed inside the body limit and the
    metrics middleware, which therefore still see every request.
    """

    def __init__(self, app, exception_handlers: Mapping) -> None:
        self.app = app
        self.exception_handlers = exception_handlers  # the app's, read per failure

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http" or scope["path"] != "/predict" or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        request = UnicodeJSONRequest(scope, receive)
        try:
            response = await predict(request)
        except Exception as exc:
            handler = next(
                (self.exception_handlers[c] for c in type(exc).__mro__
                 if c in self.exception_handlers),
                None,
            )  # fmt: skip
            if handler is None:
                raise  # to the server-error middleware, as before
            response = handler(request, exc)
            if inspect.isawaitable(response):
                response = await response
        await response(scope, receive, send)


class StoreFailure(str):
    """Why samples were not stored, in words fit for the client; ``error_id`` names the
    server log line with the detail (empty when the words say it all)."""

    error_id: str = ""


def _failure(text: str, error_id: str = "") -> StoreFailure:
    failure = StoreFailure(text)
    failure.error_id = error_id
    return failure


async def _store(svc, samples: list[Sample], request_id: str) -> StoreFailure | Response | None:
    """Commit ``samples``; None once durable, else why not (or a 409 for a reused id)."""
    if problem := svc.watch.sample_problem:  # known now: do not queue behind it
        return _failure(f"sample store unavailable: it cannot take writes ({problem})")
    try:
        committed = svc.writer.submit_async(samples)
    except (WriterOverloaded, WriterClosed) as exc:
        return error_response(503, f"not accepting samples: {exc}", request_id)
    # A timer rather than asyncio.wait_for, which wraps the future in a task's worth of
    # callbacks on every request; giving up fails the future, so an untaken request is
    # then left out of the commit (see GroupCommitWriter.submit_async).
    timer = asyncio.get_running_loop().call_later(COMMIT_TIMEOUT_SECONDS, _give_up, committed)
    try:
        await committed
    except DuplicateRequestIds:
        return _reused_id(request_id)
    except StoreReplaced:
        log.error("request %s not stored: the sample store was deleted or replaced", request_id)
        return _failure(
            "sample store unavailable: it is no longer the store this service opened "
            "(deleted or replaced); restart the service"
        )
    except _CommitTimeout:
        error_id = new_error_id()
        log.error("error %s: request %s: no commit within %g s", error_id, request_id,
                  COMMIT_TIMEOUT_SECONDS)  # fmt: skip
        return _failure(
            f"sample store unavailable: no commit within {COMMIT_TIMEOUT_SECONDS:g} s "
            f"(error id {error_id})",
            error_id,
        )
    except Exception as exc:  # the store refused the batch: the detail is for the log only
        error_id = new_error_id()
        log.error("error %s: request %s not stored: %s", error_id, request_id, describe_error(exc))
        return _failure(f"sample store unavailable (error id {error_id})", error_id)
    finally:
        timer.cancel()
    return None


class _CommitTimeout(Exception):
    """The handler stopped waiting for its commit (COMMIT_TIMEOUT_SECONDS)."""


def _give_up(committed: asyncio.Future) -> None:
    if not committed.done():
        committed.set_exception(_CommitTimeout())


def _reused_id(request_id: str) -> Response:
    return error_response(
        409,
        f"request id {request_id!r} was already used; send a new {REQUEST_ID_HEADER} "
        "(or none: the service then makes one)",
        request_id,
    )


async def _store_rejected(
    svc, model: LoadedModel, body, request_id: str, broken, client: str | None = None
) -> bool | None:
    """Store a refused request's records as rejected traffic (serving.log_rejected), at
    most the budget's share; True once durable, False if not stored (not sampled, over
    the cap, or the store failed: the 422 goes out either way), None when switched off."""
    budget, metrics, settings = svc.rejected_budget, svc.metrics, svc.settings
    if budget is None:
        return None
    fraction = settings.sample_fraction
    if not svc.sampling.keeps(request_id):  # sampling applies to rejected records too
        # Recorded, so the id cannot be used again by an accepted request; the refused
        # one itself still gets its 422.
        svc.unlogged.claim(request_id)
        return False
    received = datetime.now(UTC)
    timestamp = body.timestamp or received
    # Built (and measured) before the budget is asked: it grants bytes as stored.
    build = functools.partial(
        rejected_samples, model, body.records, broken, request_id=request_id,
        timestamp=timestamp, received=received, sample_fraction=fraction,
        limit=len(body.records), client=client,
    )  # fmt: skip
    large = len(body.records) > INLINE_RECORDS
    rows, sizes = await run_in_threadpool(_measured, build) if large else _measured(build)
    granted = budget.take(sizes, minute_of(timestamp))
    if granted < len(body.records):  # counted as the cap drops them, stored or not
        metrics.rejected_overflow_records.inc(len(body.records) - granted)
    items: list = rows[:granted]
    overflow = budget.drain_overflow()
    if overflow:
        items.append(overflow_item(request_id, overflow))
    if not items:
        return False
    failure = await _store(svc, items, request_id)
    if failure is not None:
        budget.restore(overflow)  # counted again with a later commit
        metrics.rejected_unstored_records.inc(granted)
        return False
    metrics.rejected_records.inc(granted)
    return granted == len(body.records)


def _measured(build) -> tuple[list, list[int]]:
    rows = build()
    return rows, [rejected_row_bytes(row) for row in rows]


def _broken_fields(
    model: LoadedModel, records: list[dict]
) -> tuple[list[dict], int, int, dict[int, list]]:
    """The first MAX_ERRORS broken fields, how many there are, how many records, and
    every broken record's fields (index -> FieldErrors, for the rejected traffic)."""
    errors: list[dict] = []
    broken: dict[int, list] = {}
    total = invalid = 0
    for i, record in enumerate(records):
        found = model.checker.validate(record)
        if found:
            broken[i] = list(found)
            invalid += 1
            total += len(found)
            errors.extend(
                {"record": i, "field": e.field, "reason": e.reason, "rule": e.rule}
                for e in found[: MAX_ERRORS - len(errors)]
            )
    return errors, total, invalid, broken


@functools.lru_cache(maxsize=4)
def _pause_fields(pause: PauseState) -> dict:
    """The pause's cause for its 503s, within the switch's bounds: a state written
    before they existed (megabytes of evidence, a reason with line breaks) is cut and
    escaped here, so no 503 repeats it. Built once per state, not per refused request."""
    data = pause.shown().to_dict()
    fields = {
        key: data[key]
        for key in (
            "paused", "reason", "review_id", "monitor", "window_start", "window_end",
            "evidence", "actor", "since",
        )
    }  # fmt: skip
    if len(pause.evidence) > MAX_EVIDENCE_LINKS:
        fields["evidence_omitted"] = len(pause.evidence) - MAX_EVIDENCE_LINKS
    return fields


def client_identity(request: Request, header: str | None) -> str:
    """Who sent ``request``: the last comma-separated entry of ``header`` (the one the
    nearest proxy appended to X-Forwarded-For; entries before it are the client's own
    words), else the peer address. A request without the header counts as its peer
    (the proxy itself), so a client cannot become a new client by leaving it out."""
    if header is not None:
        value = request.headers.get(header, "").rsplit(",", 1)[-1].strip()
        if value:
            return value
    peer = request.client
    return peer.host if peer is not None else ""


def _samples(
    model: LoadedModel,
    body: PredictRequest,
    request_id: str,
    received: datetime,
    scored: Scored,
    sample_fraction: float = 1.0,
    client: str | None = None,
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
            prediction=float(scored.prediction[i]),
            predicted_class=int(scored.predicted_class[i]),
            predicted_label=scored.predicted_label[i],
            sample_fraction=sample_fraction,
            client=client,
        )
        for i, record in enumerate(body.records)
    ]
