"""FastAPI dependencies of the routers: the running service's state, admin auth."""

from __future__ import annotations

import hmac
from typing import Annotated

from driftgate.serving.state import ServiceState
from fastapi import Depends, Request


async def get_service(request: Request) -> ServiceState:
    # async: a plain def dependency would run in the thread pool on every request.
    return request.app.state.service


Service = Annotated[ServiceState, Depends(get_service)]


class AuthError(Exception):
    """An admin request without a valid bearer token (401) or with a wrong one (403)."""

    def __init__(self, status: int, detail: str) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail


async def require_admin(request: Request, svc: Service) -> None:
    header = request.headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise AuthError(401, "admin endpoints need 'Authorization: Bearer <token>'")
    expected = svc.admin_token
    # compare_digest: the comparison time does not reveal how much of a guess matched.
    if not expected or not hmac.compare_digest(token.strip().encode(), expected.encode()):
        raise AuthError(403, "admin token refused")
