"""``GET /healthz`` (the process answers), ``GET /readyz`` (it can serve and record),
``GET /metrics`` (Prometheus text format)."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import Response

from driftgate.serving.dependencies import Service, require_admin
from driftgate.serving.jsonbody import UnicodeJSONRoute
from driftgate.serving.responses import SafeJSONResponse
from driftgate.serving.state import liveness_problems, readiness_problems

router = APIRouter(route_class=UnicodeJSONRoute)


@router.get("/healthz")
async def healthz(svc: Service):
    # Fails only for what a restart cures (a dead writer or store watch): a liveness
    # probe must not restart the process for a store outage that it cannot fix.
    problems = liveness_problems(svc)
    if problems:
        return SafeJSONResponse({"status": "failing", "problems": problems}, status_code=503)
    return {"status": "ok"}


@router.get("/readyz")
async def readyz(svc: Service):
    problems = readiness_problems(svc)  # cached checks: no store round trip per probe
    model = svc.champion.current
    body = {
        "ready": not problems,
        "model_name": svc.model_name,
        "model_version": model.version if model else None,
        "backend": svc.settings.backend,
        # The contract file requests are validated against (its name: an accepted
        # revision shows here once the watcher applied it).
        "contract": svc.champion.contract_path.name if svc.champion.contract_path else None,
        "paused": svc.pause.current().paused,
        "problems": problems,
        # Still ready on the old version when the alias names one that cannot be loaded
        # (e.g. refused by the model allow-list): say why the alias is not followed.
        "champion_error": svc.champion.last_error,
    }
    return SafeJSONResponse(body, status_code=200 if not problems else 503)


@router.get("/metrics")
async def metrics_endpoint(request: Request, svc: Service) -> Response:
    if svc.settings.metrics_auth == "token":  # serving.metrics_auth: behind the admin token
        require_admin(request)
    return Response(svc.metrics.render(), media_type=svc.metrics.content_type)
