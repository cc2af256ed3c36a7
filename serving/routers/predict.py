"""``POST /predict``: validate → predict → commit the samples → answer."""

from __future__ import annotations

import asyncio
import logging
from datetime import UTC, datetime

import numpy as np
from driftgate.serving.champion import LoadedModel
from driftgate.serving.dependencies import Service
from driftgate.serving.jsonbody import UnicodeJSONRoute
from driftgate.serving.responses import (
    REQUEST_ID_HEADER,
    SAMPLE_STORED_HEADER,
    SafeJSONResponse,
    error_response,
    request_id_of,
)
from driftgate.serving.schemas import PredictRequest, PredictResponse
from driftgate.serving.writer import WriterClosed, WriterOverloaded
from fastapi import APIRouter, Request
from fastapi.concurrency import run_in_threadpool

from driftgate.core.redaction import redact_credentials
from driftgate.stores.samples import Sample

log = logging.getLogger(__name__)

# Above this many records, scoring moves off the event loop so it cannot stall it.
INLINE_RECORDS = 64
# An acknowledgement waits at most this long for its commit before answering 503.
COMMIT_TIMEOUT_SECONDS = 30.0

router = APIRouter(route_class=UnicodeJSONRoute)


@router.post("/predict", response_model=PredictResponse)
async def predict(body: PredictRequest, request: Request, svc: Service):
    settings, metrics = svc.settings, svc.metrics
    request_id = request_id_of(request)
    pause = svc.pause.current()
    if pause.paused:
        metrics.paused_requests.inc()
        return error_response(
            503, "inference paused", request_id, paused=True, **_pause_fields(pause)
        )
    model = svc.champion.current
    if model is None:
        return error_response(503, svc.champion.last_error or "no champion loaded", request_id)
    if len(body.records) > settings.max_records_per_request:
        return error_response(
            422,
            f"{len(body.records)} records; at most {settings.max_records_per_request}",
            request_id,
            errors=[{"record": None, "field": "records", "reason": "too many records"}],
        )
    if body.timestamp is not None and not settings.accept_client_timestamps:
        return error_response(
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
        return error_response(422, "request breaks the input contract", request_id, errors=errors)

    matrix = np.array(
        [[record[f] for f in model.features] for record in body.records], dtype=np.float32
    )
    if len(body.records) > INLINE_RECORDS:
        probabilities = await run_in_threadpool(model.predict, matrix)
    else:
        probabilities = model.predict(matrix)
    if probabilities.shape != (len(body.records),) or not np.isfinite(probabilities).all():
        log.error("model v%s returned unusable output for request %s", model.version, request_id)
        return error_response(
            500, "the model returned a non-finite or misshapen output", request_id
        )
    classes = (probabilities >= settings.decision_threshold).astype(int)

    received = datetime.now(UTC)
    samples = _samples(model, body, request_id, received, probabilities, classes)
    try:
        committed = svc.writer.submit(samples)
    except (WriterOverloaded, WriterClosed) as exc:
        return error_response(503, f"not accepting samples: {exc}", request_id)
    stored = True
    try:
        await asyncio.wait_for(asyncio.wrap_future(committed), COMMIT_TIMEOUT_SECONDS)
    except Exception as exc:  # store down, timeout: the samples are not recorded
        reason = redact_credentials(f"sample store unavailable: {exc}")
        if settings.on_store_failure == "fail_closed":
            return error_response(
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


def _pause_fields(pause) -> dict:
    data = pause.to_dict()
    return {
        key: data[key]
        for key in (
            "reason", "review_id", "monitor", "window_start", "window_end", "evidence",
            "actor", "since",
        )
    }  # fmt: skip


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
