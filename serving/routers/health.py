"""``GET /healthz`` (the process answers), ``GET /readyz`` (it can serve and record),
``GET /metrics`` (Prometheus text format)."""

from __future__ import annotations

from driftgate.serving.dependencies import Service
from driftgate.serving.jsonbody import UnicodeJSONRoute
from driftgate.serving.responses import SafeJSONResponse
from driftgate.serving.state import readiness_problems
from fastapi import APIRouter
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import Response

router = APIRouter(route_class=UnicodeJSONRoute)


@router.get("/healthz")
async def healthz() -> dict:
    return {"status": "ok"}


@router.get("/readyz")
async def readyz(svc: Service):
    problems = await run_in_threadpool(readiness_problems, svc)
    model = svc.champion.current
    body = {
        "ready": not problems,
        "model_name": svc.model_name,
        "model_version": model.version if model else None,
        "paused": svc.pause.current().paused,
        "problems": problems,
    }
    return SafeJSONResponse(body, status_code=200 if not problems else 503)


@router.get("/metrics")
async def metrics_endpoint(svc: Service) -> Response:
    return Response(svc.metrics.render(), media_type=svc.metrics.content_type)
