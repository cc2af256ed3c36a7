"""``POST /admin/pause``, ``POST /admin/resume``, ``GET /admin/state``: the durable
pause switch, behind the bearer token of :func:`serving.dependencies.require_admin`."""

from __future__ import annotations

import logging

from fastapi import APIRouter, Request
from fastapi.concurrency import run_in_threadpool

from driftgate.serving.dependencies import AdminRoute, Service
from driftgate.serving.errors import describe_error, new_error_id
from driftgate.serving.responses import error_response, request_id_of
from driftgate.serving.schemas import PauseRequest, ResumeRequest
from driftgate.stores.control import ControlValueError

log = logging.getLogger(__name__)

# How long a switch change waits for another writer of the control store before the
# admin client gets a 503 (the CLI and the drift check wait the store's default).
LOCK_WAIT_MS = 5_000

PREFIX = "/admin/"
# Admin bodies are small: the largest the switch's field bounds allow
# (driftgate/stores/control.py: a 1,000-character reason, three 256-character names,
# 16 evidence links of 1,024 characters; 18,152 characters) is 218 KB even with every
# character a JSON escape of 12 bytes. Larger bodies get 413 before they are read.
MAX_BODY_BYTES = 256 * 1024

router = APIRouter(prefix=PREFIX.rstrip("/"), route_class=AdminRoute)


class ControlStoreUnavailable(Exception):
    """The control store refused a read or a switch change; ``error_id`` names the log line."""

    def __init__(self, error_id: str) -> None:
        super().__init__(error_id)
        self.error_id = error_id


async def _control(call):
    try:
        return await run_in_threadpool(call)
    except ControlValueError:
        raise  # the body's schema applies the same rules: a 422 naming the field
    except Exception as exc:
        error_id = new_error_id()
        log.error("error %s: control store: %s", error_id, describe_error(exc))
        raise ControlStoreUnavailable(error_id) from None


def control_unavailable(request: Request, exc: ControlStoreUnavailable):
    return error_response(
        503,
        f"control store unavailable (error id {exc.error_id}); the switch did not change",
        error_id=exc.error_id,
    )


def control_refused(request: Request, exc: ControlValueError):
    return error_response(
        422,
        "invalid request",
        request_id_of(request),
        errors=[{"record": None, "field": exc.field, "reason": exc.problem}],
    )


@router.post("/pause")
async def admin_pause(body: PauseRequest, request: Request, svc: Service) -> dict:
    change = await _control(
        lambda: svc.control.pause(
            svc.model_name,
            reason=body.reason,
            actor=body.by or _client_actor(request),
            monitor=body.monitor,
            window_start=body.window_start,
            window_end=body.window_end,
            evidence=body.evidence,
            review_id=body.review_id,
            lock_wait_ms=LOCK_WAIT_MS,
        )
    )
    svc.pause.set(change.state)
    return _change_body(change)


@router.post("/resume")
async def admin_resume(body: ResumeRequest, request: Request, svc: Service) -> dict:
    change = await _control(
        lambda: svc.control.resume(
            svc.model_name,
            reason=body.reason,
            actor=body.by or _client_actor(request),
            lock_wait_ms=LOCK_WAIT_MS,
        )
    )
    svc.pause.set(change.state)
    return _change_body(change)


@router.get("/state")
async def admin_state(svc: Service, limit: int = 20) -> dict:
    state = await run_in_threadpool(svc.pause.refresh)
    events = await _control(lambda: svc.control.events(svc.model_name, max(1, min(limit, 500))))
    return {"state": state.to_dict(), "events": [e.to_dict() for e in events]}


def _client_actor(request: Request) -> str:
    return f"http:{request.client.host if request.client else 'unknown'}"


def _change_body(change) -> dict:
    return {
        "changed": change.changed,
        "state": change.state.to_dict(),
        "event": change.event.to_dict() if change.event else None,
    }
