"""FastAPI dependencies of the routers: the running service's state, admin auth."""

from __future__ import annotations

import hmac
from typing import Annotated

from fastapi import Depends, Request
from fastapi.responses import Response

from driftgate.config.serving import UNVERIFIED_SOURCE
from driftgate.serving.jsonbody import UnicodeJSONRoute
from driftgate.serving.state import ServiceState


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


# A bearer token is a few dozen characters; a longer header is refused unread.
MAX_AUTHORIZATION_CHARS = 1024


def _bearer_token(request: Request, who: str) -> str:
    """The request's bearer token ("" without an Authorization header); AuthError 401
    for one that is oversized, or that is there but not a bearer token."""
    header = request.headers.get("authorization", "")
    if len(header) > MAX_AUTHORIZATION_CHARS:
        raise AuthError(
            401, f"Authorization header longer than {MAX_AUTHORIZATION_CHARS} characters"
        )
    scheme, _, token = header.partition(" ")
    if header and (scheme.lower() != "bearer" or not token.strip()):
        raise AuthError(401, f"{who} need 'Authorization: Bearer <token>'")
    return token.strip()


def label_source(request: Request) -> str:
    """The name of who sends labels on this request (``serving.feedback_auth``).

    ``token`` (the default): the admin token is source ``admin``, a
    ``serving.label_sources`` token that source's name; no or another token is refused
    (401/403). ``none``: the same for a token sent, and ``unverified`` without one. Every
    known token is compared, in constant time each, so the time taken does not tell
    which one a guess came near.
    """
    svc: ServiceState = request.app.state.service
    token = _bearer_token(request, "labels")
    if not token:
        if svc.settings.feedback_auth == "none":
            return UNVERIFIED_SOURCE
        raise AuthError(401, "labels need 'Authorization: Bearer <token>'")
    found = None
    for name, expected in svc.label_tokens.items():
        if expected and hmac.compare_digest(token.encode(), expected.encode()):
            found = name
    if found is None:
        raise AuthError(403, "label source token refused")
    return found


def require_admin(request: Request) -> None:
    """Raise AuthError unless the request carries the admin token.

    Called by :class:`AdminRoute` before the body is read, so an unauthenticated
    client learns nothing about what a valid body looks like.
    """
    svc: ServiceState = request.app.state.service
    token = _bearer_token(request, "admin endpoints")
    if not token:
        raise AuthError(401, "admin endpoints need 'Authorization: Bearer <token>'")
    expected = svc.admin_token
    # compare_digest: the comparison time does not reveal how much of a guess matched.
    if not expected or not hmac.compare_digest(token.encode(), expected.encode()):
        raise AuthError(403, "admin token refused")


class AdminRoute(UnicodeJSONRoute):
    """Admin routes authenticate before FastAPI reads or validates the body."""

    def get_route_handler(self):
        handler = super().get_route_handler()

        async def authenticated_handler(request: Request) -> Response:
            require_admin(request)
            return await handler(request)

        return authenticated_handler
