"""``POST /feedback``: delayed labels of served records.

The body is a JSON list of ``{"request_id", "record_index", "label"}`` (at most
``serving.max_records_per_request`` of them). Every label is judged by
:func:`driftgate.jobs.feedback.submit_labels`, and a request is stored all or nothing:

- 200: every label was accepted (new, the same label again, or a correction when
  ``serving.label_corrections`` allows it); the body counts each kind;
- 404: some request ids / record indexes have no stored sample, named in ``errors``
  (nothing stored). A label sent before its prediction was answered is one of them:
  the header ``Retry-After`` says when to send it again;
- 409: a label for an already labelled record that may not replace it (nothing
  stored); the answer never holds the stored label (see
  :mod:`driftgate.jobs.feedback` for who may replace what);
- 422: the body's shape (naming the field), a label that is not one of the task's
  (binary 0/1, a class label, a finite number), or a record served longer than
  ``serving.label_horizon`` ago (nothing stored);
- 401/403: ``serving.feedback_auth: token`` (the default) and no bearer token, or a
  token that is neither the admin token nor a ``serving.label_sources`` one (with
  ``none``: a wrong token), checked before the body is read; 503: the sample store is
  unavailable.

Every label is stored with its source: ``admin``, the ``label_sources`` name whose token
came, or ``unverified`` (``feedback_auth: none`` and no token).

Sending the same request again is always safe: a label already stored counts as a
duplicate.
"""

from __future__ import annotations

import logging
from typing import Annotated

from fastapi import APIRouter, Body, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import Response
from pydantic import BaseModel, ConfigDict, Field, StrictFloat, StrictInt

from driftgate import registry
from driftgate.jobs.feedback import FeedbackOutcome, LabelInput, submit_labels
from driftgate.serving.dependencies import Service, label_source
from driftgate.serving.errors import describe_error, new_error_id
from driftgate.serving.jsonbody import UnicodeJSONRoute
from driftgate.serving.responses import MAX_ERRORS, error_response, request_id_of
from driftgate.serving.schemas import CategoryText

log = logging.getLogger(__name__)

# Seconds a client waits before sending again labels whose request was not yet stored:
# a group commit takes milliseconds, so one second covers a request still in flight.
RETRY_AFTER_SECONDS = 1


class FeedbackItem(BaseModel):
    """One label: which record of which request, and its true outcome."""

    model_config = ConfigDict(extra="forbid")

    request_id: str = Field(min_length=1, max_length=128, pattern=r"^[A-Za-z0-9._:\-]+$")
    record_index: StrictInt = Field(ge=0, le=2**31 - 1)
    label: StrictInt | StrictFloat | CategoryText


class FeedbackRoute(UnicodeJSONRoute):
    """Authenticates (``serving.feedback_auth``) before FastAPI reads the body."""

    def get_route_handler(self):
        handler = super().get_route_handler()

        async def feedback_handler(request: Request) -> Response:
            # Who sends is stored with every label: the retrain tells evidence someone
            # vouches for from evidence nobody does (issue 28).
            request.state.label_source = label_source(request)
            return await handler(request)

        return feedback_handler


router = APIRouter(route_class=FeedbackRoute)


@router.post("/feedback")
async def feedback(
    items: Annotated[list[FeedbackItem], Body(min_length=1)], request: Request, svc: Service
):
    request_id = request_id_of(request)
    settings = svc.settings
    if len(items) > settings.max_records_per_request:
        return error_response(
            422,
            f"{len(items)} labels; at most {settings.max_records_per_request} "
            "(serving.max_records_per_request)",
            request_id,
            errors=[{"record": None, "field": "body", "reason": "too many labels"}],
        )
    inputs = [
        LabelInput(i, item.request_id, item.record_index, item.label)
        for i, item in enumerate(items)
    ]
    try:
        outcome = await run_in_threadpool(
            submit_labels,
            svc.labels,
            inputs,
            outputs_of=lambda name, version: _outputs_of(svc, name, version),
            horizon=settings.horizon,
            corrections=settings.label_corrections,
            source=request.state.label_source,
            sampling=svc.sampling,
        )
    except Exception as exc:  # the detail is for the log only
        error_id = new_error_id()
        log.error("error %s: feedback %s: %s", error_id, request_id, describe_error(exc))
        which = "model registry" if isinstance(exc, registry.RegistryError) else "label store"
        return error_response(
            503, f"{which} unavailable (error id {error_id}); nothing stored", request_id,
            error_id=error_id,
        )  # fmt: skip
    return _answer(outcome, request_id)


def _outputs_of(svc, model_name: str, version: str) -> tuple[str, tuple[str, ...]]:
    """The task and classes of the version that scored a record (the champion's at
    hand; another version's from the registry)."""
    current = svc.champion.current
    if current is not None and current.version == version and current.name == model_name:
        return current.task, tuple(current.classes)
    return registry.version_outputs(svc.champion.tracking, model_name, version)


def _answer(outcome: FeedbackOutcome, request_id: str) -> Response:
    def listed(*groups: tuple[list, str]) -> dict:
        errors = [{**r.to_dict(), "field": field} for refusals, field in groups for r in refusals]
        extra = {"errors": errors[:MAX_ERRORS]}
        if len(errors) > MAX_ERRORS:
            extra["errors_omitted"] = len(errors) - MAX_ERRORS
        return extra

    counts = outcome.counts()
    if outcome.unknown:
        response = error_response(
            404,
            f"{len(outcome.unknown)} label(s) for unknown request ids or record indexes; "
            "nothing stored. A prediction's id is known once its answer was sent: send "
            "labels of requests still in flight again after Retry-After",
            request_id,
            counts=counts,
            **listed((outcome.unknown, "request_id")),
        )
        response.headers["Retry-After"] = str(RETRY_AFTER_SECONDS)
        return response
    if outcome.invalid or outcome.late:
        return error_response(
            422,
            f"{len(outcome.invalid)} label(s) of the wrong type, {len(outcome.late)} beyond "
            "serving.label_horizon; nothing stored",
            request_id,
            counts=counts,
            **listed((outcome.invalid, "label"), (outcome.late, "request_id")),
        )
    if outcome.conflicts:
        return error_response(
            409,
            f"{len(outcome.conflicts)} label(s) for records already labelled; nothing stored",
            request_id,
            counts=counts,
            **listed((outcome.conflicts, "label")),
        )
    return error_response(200, "labels stored", request_id, **counts)
