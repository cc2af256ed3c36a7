"""``POST /admin/pause``, ``POST /admin/resume``, ``GET /admin/state``: the durable
pause switch, behind the bearer token of :func:`serving.dependencies.require_admin`."""

from __future__ import annotations

from driftgate.serving.dependencies import Service, require_admin
from driftgate.serving.jsonbody import UnicodeJSONRoute
from driftgate.serving.schemas import PauseRequest, ResumeRequest
from fastapi import APIRouter, Depends, Request
from fastapi.concurrency import run_in_threadpool

router = APIRouter(
    prefix="/admin", route_class=UnicodeJSONRoute, dependencies=[Depends(require_admin)]
)


@router.post("/pause")
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


@router.post("/resume")
async def admin_resume(body: ResumeRequest, request: Request, svc: Service) -> dict:
    change = await run_in_threadpool(
        lambda: svc.control.resume(
            svc.model_name, reason=body.reason, actor=body.by or _client_actor(request)
        )
    )
    svc.pause.set(change.state)
    return _change_body(change)


@router.get("/state")
async def admin_state(svc: Service, limit: int = 20) -> dict:
    state = await run_in_threadpool(svc.pause.refresh)
    events = await run_in_threadpool(svc.control.events, svc.model_name, max(1, min(limit, 500)))
    return {"state": state.to_dict(), "events": [e.to_dict() for e in events]}


def _client_actor(request: Request) -> str:
    return f"http:{request.client.host if request.client else 'unknown'}"


def _change_body(change) -> dict:
    return {
        "changed": change.changed,
        "state": change.state.to_dict(),
        "event": change.event.to_dict() if change.event else None,
    }
