"""Request bodies: Unicode JSON without duplicate keys, parsed off the event loop when
large, with a bound on the work a body can cause.

- A JSON object may not repeat a key (the last would win silently) nor hold more
  than :data:`MAX_OBJECT_KEYS` keys: both are refused as a whole-body 400 naming the
  key or the count, before any validation runs.
- Bodies above :data:`INLINE_BODY_BYTES` are parsed and validated in the thread pool,
  so a large body cannot stall ``/healthz`` and other requests on the event loop.
- Routes with a pydantic body use :class:`UnicodeJSONRoute` (FastAPI's documented
  custom-route hook); ``/predict`` calls :func:`read_body` itself, which also refuses
  too many records before pydantic sees them.
"""

from __future__ import annotations

import email.message
import functools
import json
from collections.abc import Callable
from typing import Any

from fastapi import Request
from fastapi.concurrency import run_in_threadpool
from fastapi.exceptions import HTTPException, RequestValidationError
from fastapi.responses import Response
from fastapi.routing import APIRoute
from pydantic import BaseModel, ValidationError

# A record holds a model's features plus a few extras; no JSON object of a request needs
# more keys than this, and each key costs a validation error when it is unknown.
MAX_OBJECT_KEYS = 1024
# Bodies above this size are parsed and validated off the event loop.
INLINE_BODY_BYTES = 64 * 1024
# Validation errors kept from pydantic; the answer lists at most MAX_ERRORS of them.
_KEPT_PYDANTIC_ERRORS = 1000


class BodyRefused(ValueError):
    """The body is JSON but not one the service will look at (a duplicate key, too many
    keys); its message is the reason given to the client."""


def _object(pairs: list[tuple[str, Any]]) -> dict:
    if len(pairs) > MAX_OBJECT_KEYS:
        raise BodyRefused(f"an object with {len(pairs)} keys; at most {MAX_OBJECT_KEYS}")
    result = dict(pairs)
    if len(result) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise BodyRefused(f"duplicate key {key!r}")
            seen.add(key)
    return result


# One decoder: ``json.loads`` with a hook builds a new decoder and scanner per call
# (a third of a one-record body's parse).
_DECODER = json.JSONDecoder(object_pairs_hook=_object)


def unicode_json(body: bytes) -> Any:
    """``json.loads(body)``, refusing duplicate keys, huge objects and non-Unicode text.

    JSON may spell an unpaired surrogate (``"\\ud800"``); Python decodes it to a
    string no UTF-8 store or log can hold, and pydantic reports it under a mangled
    name. Such a body is refused whole (400, field ``body``). Syntax errors propagate
    as ``JSONDecodeError``.
    """
    if json.detect_encoding(body) == "utf-8" and b"\\u" not in body:
        # The common body: strict UTF-8 (the strict codec refuses a surrogate's bytes)
        # and no backslash-u escape to spell one, so none of its strings can hold one:
        # the walk below is skipped (a third of the body's cost, request_path_bench).
        try:
            text = body.decode("utf-8")
        except UnicodeDecodeError:
            pass  # json.loads decodes with surrogatepass: the walk decides
        else:
            return _DECODER.decode(text)
    data = json.loads(body, object_pairs_hook=_object)
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


async def _parse(body: bytes) -> Any:
    if len(body) > INLINE_BODY_BYTES:
        return await run_in_threadpool(unicode_json, body)
    return unicode_json(body)


class UnicodeJSONRequest(Request):
    async def json(self) -> Any:
        if not hasattr(self, "_json"):
            self._json = await _parse(await self.body())
        return self._json


class UnicodeJSONRoute(APIRoute):
    """Bodies parse with :func:`unicode_json`; a ValueError becomes FastAPI's 400,
    which the app's handler turns into the service's error format."""

    def get_route_handler(self):
        handler = super().get_route_handler()

        async def unicode_json_handler(request: Request) -> Response:
            return await handler(UnicodeJSONRequest(request.scope, request.receive))

        return unicode_json_handler


class TooManyRecords(Exception):
    def __init__(self, count: int) -> None:
        super().__init__(f"{count} records")
        self.count = count


class CappedValidationError(RequestValidationError):
    """A RequestValidationError that kept only its first errors; ``total`` counts all."""

    def __init__(self, errors: list, total: int) -> None:
        super().__init__(errors)
        self.total = total


@functools.lru_cache(maxsize=64)  # clients send one or two spellings, again and again
def _is_json(content_type: str | None) -> bool:
    # As FastAPI decides whether to read a body as JSON (no type: JSON).
    if not content_type:
        return True
    message = email.message.Message()
    message["content-type"] = content_type
    subtype = message.get_content_subtype()
    return message.get_content_maintype() == "application" and (
        subtype == "json" or subtype.endswith("+json")
    )


def _validate(body: bytes, is_json: bool, model: type[BaseModel], max_records: int, plain=None):
    if not body:
        raise RequestValidationError(
            [{"type": "missing", "loc": ("body",), "msg": "Field required"}]
        )
    try:
        data = unicode_json(body) if is_json else body
    except json.JSONDecodeError as exc:
        syntax = {"type": "json_invalid", "loc": ("body", exc.pos), "msg": "JSON decode error"}
        raise RequestValidationError([{**syntax, "ctx": {"error": exc.msg}}]) from exc
    except Exception as exc:  # as FastAPI: a 400 from the cause
        raise HTTPException(400, "There was an error parsing the body") from exc
    records = data.get("records") if isinstance(data, dict) else None
    if isinstance(records, list) and len(records) > max_records:
        raise TooManyRecords(len(records))  # before pydantic builds an error per record
    if plain is not None and (read := plain(data)) is not None:
        return read
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        errors = [
            {"loc": ("body", *error["loc"]), "msg": error["msg"], "type": error["type"]}
            for error in exc.errors(include_url=False, include_input=False)[:_KEPT_PYDANTIC_ERRORS]
        ]
        raise CappedValidationError(errors, exc.error_count()) from None


async def read_body(
    request: Request,
    model: type[BaseModel],
    max_records: int,
    plain: Callable[[Any], BaseModel | None] | None = None,
) -> BaseModel:
    """The request's body validated as ``model``, with FastAPI's error types (400 for
    unreadable bytes, RequestValidationError for the rest), off the event loop when
    the body is large. Raises TooManyRecords beyond ``max_records`` records.

    ``plain``: reads a parsed body that needs no validation as ``model`` (None when it
    does: ``model_validate`` then runs, so every refusal keeps pydantic's words)."""
    body = await request.body()
    is_json = _is_json(request.headers.get("content-type"))
    if len(body) > INLINE_BODY_BYTES:
        return await run_in_threadpool(_validate, body, is_json, model, max_records, plain)
    return _validate(body, is_json, model, max_records, plain)
