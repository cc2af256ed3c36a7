"""The service's answers: JSON that never fails to encode, and one error format.

Every error body is ``{"detail": ..., "request_id": ..., "errors": [{"record",
"field", "reason"}, ...]}`` (``errors`` where fields are at fault).
"""

from __future__ import annotations

import json
import re
import uuid
from typing import Any

import orjson
from fastapi import Request
from fastapi.responses import JSONResponse, Response

from driftgate.serving.jsonbody import BodyRefused

REQUEST_ID_HEADER = "X-Request-ID"
SAMPLE_STORED_HEADER = "X-Driftgate-Sample-Stored"
_REQUEST_ID = re.compile(r"^[A-Za-z0-9._:\-]{1,128}$")
# An answer lists at most this many broken fields, then counts the rest: a body with
# thousands of bad fields must not cost a reply a hundred times its size.
MAX_ERRORS = 100


class SafeJSONResponse(JSONResponse):
    """JSON with every non-ASCII character escaped.

    Error responses echo field names from the request, and a JSON ``\\ud800`` escape
    decodes to an unpaired surrogate, which UTF-8 cannot encode: Starlette's
    ``JSONResponse`` would fail (a 500) where this writes the escape back.
    """

    def render(self, content: Any) -> bytes:
        return json.dumps(
            content, ensure_ascii=True, allow_nan=False, separators=(",", ":")
        ).encode("ascii")


def json_bytes(content: Any) -> bytes:
    """``content`` as :class:`SafeJSONResponse` renders it, through orjson when that
    gives the same answer: ASCII bytes (else the json module escapes what is not), for
    content without NaN or infinities (orjson would write null: callers pass finite
    numbers only, as /predict's checked outputs)."""
    try:
        rendered = orjson.dumps(content)
    except TypeError:  # an int past 64 bits, a type orjson does not know: json decides
        pass
    else:
        if rendered.isascii():
            return rendered
    return json.dumps(content, ensure_ascii=True, allow_nan=False, separators=(",", ":")).encode(
        "ascii"
    )


class RawJSONResponse(Response):
    """A finished JSON body with its headers as raw pairs: the answer /predict sends
    most, built without Starlette's header normalisation (``init_headers``) per
    request. ``headers`` are lower-case latin-1 name/value pairs."""

    media_type = "application/json"

    def __init__(self, body: bytes, headers: list[tuple[bytes, bytes]], status_code: int = 200):
        self.status_code = status_code
        self.background = None
        self.body = body
        self.raw_headers = [
            (b"content-length", str(len(body)).encode("latin-1")),
            (b"content-type", b"application/json"),
            *headers,
        ]


def error_response(
    status: int, detail: str, request_id: str | None = None, **extra: Any
) -> SafeJSONResponse:
    body = {"detail": detail, **extra}
    headers = {REQUEST_ID_HEADER: request_id} if request_id else None
    if request_id:
        body["request_id"] = request_id
    return SafeJSONResponse(body, status_code=status, headers=headers)


def capped(errors: list[dict], total: int | None = None) -> dict:
    """``{"errors": first MAX_ERRORS, "errors_omitted": how many more}`` (the count only
    when some were left out); ``total`` when ``errors`` is itself a prefix."""
    total = len(errors) if total is None else total
    fields: dict = {"errors": errors[:MAX_ERRORS]}
    if total > len(fields["errors"]):
        fields["errors_omitted"] = total - len(fields["errors"])
    return fields


def body_error(request_id: str, reason: str, status: int = 400, detail: str = "") -> JSONResponse:
    """The request body cannot be read as JSON at all (or is too large)."""
    return error_response(
        status,
        detail or "request body is not readable JSON",
        request_id,
        errors=[{"record": None, "field": "body", "reason": reason}],
    )


def unreadable_reason(cause: BaseException | None) -> str:
    """Why FastAPI could not decode a body (it raises a bare 400 from the cause)."""
    if isinstance(cause, BodyRefused):
        return str(cause)
    if isinstance(cause, UnicodeDecodeError):
        return f"not valid UTF-8 ({cause.reason} at byte {cause.start})"
    if isinstance(cause, RecursionError):
        return "JSON nested too deeply"
    if isinstance(cause, ValueError):  # e.g. an integer past Python's 4300-digit limit
        return f"not valid JSON: {cause}"
    return "not valid JSON"


def request_id_of(request: Request) -> str:
    """The client's ``X-Request-ID`` if it is a valid id, else a fresh one."""
    given = request.headers.get(REQUEST_ID_HEADER)
    return given if given and _REQUEST_ID.match(given) else uuid.uuid4().hex


def field_of(location: tuple) -> tuple[int | None, str]:
    """``("body", "records", 3, "temperature")`` -> ``(3, "temperature")``."""
    # Only the leading "body": a record may well have a field called "body".
    parts = list(location[1:] if location[:1] == ("body",) else location)
    if len(parts) >= 2 and parts[0] == "records" and isinstance(parts[1], int):
        # Further parts name the union member that failed ("temperature.float"): drop them.
        return parts[1], str(parts[2]) if len(parts) > 2 else "records"
    if len(parts) >= 2 and isinstance(parts[0], int):  # a list body (POST /feedback)
        return parts[0], str(parts[1])
    # A field may be called "" (a JSON key can be empty): name it as it is.
    return None, ".".join(str(p) for p in parts) if parts else "body"
