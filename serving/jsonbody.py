"""Request bodies parse as Unicode JSON: FastAPI's documented custom-route hook."""

from __future__ import annotations

import json
from typing import Any

from fastapi import Request
from fastapi.responses import Response
from fastapi.routing import APIRoute


def unicode_json(body: bytes) -> Any:
    """``json.loads(body)``, refusing text that is not Unicode.

    JSON may spell an unpaired surrogate (``"\\ud800"``); Python decodes it to a
    string no UTF-8 store or log can hold, and pydantic reports it under a mangled
    name. Such a body is refused whole (400, field ``body``). Syntax errors propagate
    as ``JSONDecodeError``.
    """
    data = json.loads(body)
    stack = [data]
    while stack:
        value = stack.pop()
        if isinstance(value, dict):
            stack.extend(value.keys())
            stack.extend(value.values())
        elif isinstance(value, list):
            stack.extend(value)
        elif isinstance(value, str):
            try:
                value.encode("utf-8")
            except UnicodeEncodeError as exc:
                bad = value[exc.start : exc.end].encode("unicode_escape").decode()
                raise ValueError(f"text holds an unpaired surrogate ({bad})") from None
    return data


class UnicodeJSONRequest(Request):
    async def json(self) -> Any:
        if not hasattr(self, "_json"):
            self._json = unicode_json(await self.body())
        return self._json


class UnicodeJSONRoute(APIRoute):
    """Bodies parse with :func:`unicode_json`; a ValueError becomes FastAPI's 400,
    which the app's handler turns into the service's error format."""

    def get_route_handler(self):
        handler = super().get_route_handler()

        async def unicode_json_handler(request: Request) -> Response:
            return await handler(UnicodeJSONRequest(request.scope, request.receive))

        return unicode_json_handler
