"""Request-body limits of the inference service, enforced before the body is parsed.

A body above ``serving.max_body_bytes`` (or a route's smaller limit: the admin
routes') is refused with 413 without being read into memory: by its ``Content-Length``
when the client declares one (the HTTP server then frames the body by it), else while
the chunks arrive. Pure ASGI, like the metrics middleware: nothing is added per request
on the hot path but one header lookup and one prefix test.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any


class BodyLimitMiddleware:
    """Answer ``refuse(scope, limit)`` (an ASGI app) for bodies over ``max_bytes``, or
    over the smaller limit of the first ``path_limits`` prefix the path starts with."""

    def __init__(
        self,
        app,
        max_bytes: int,
        refuse: Callable[[dict, int], Any],
        path_limits: Mapping[str, int] | None = None,
    ) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.refuse = refuse
        self.path_limits = tuple((path_limits or {}).items())

    def limit_of(self, path: str) -> int:
        for prefix, limit in self.path_limits:
            if path.startswith(prefix):
                return min(limit, self.max_bytes)
        return self.max_bytes

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = self.limit_of(scope["path"])
        declared = _content_length(scope)
        if declared is not None:
            if declared > limit:
                await self.refuse(scope, limit)(scope, receive, send)
            else:
                await self.app(scope, receive, send)
            return
        # No Content-Length (chunked upload): read up to the limit, then replay.
        messages, size = [], 0
        while True:
            message = await receive()
            messages.append(message)
            if message["type"] != "http.request":
                break  # the client went away
            size += len(message.get("body", b""))
            if size > limit:
                await self.refuse(scope, limit)(scope, receive, send)
                return
            if not message.get("more_body", False):
                break
        buffered = iter(messages)

        async def replay():
            for message in buffered:
                return message
            return await receive()

        await self.app(scope, replay, send)


def _content_length(scope) -> int | None:
    for name, value in scope.get("headers", ()):
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None  # servers refuse these; if not, the body is counted as it comes
    return None
