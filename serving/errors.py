"""Failure details belong in the server log, not in HTTP answers.

A store's error text can quote the failed statement with its parameters — other
clients' request ids, features and predictions — and its URL. Answers carry a stable
message and an error id; the log line with the same id carries the detail, without
the parameters and with credentials redacted.
"""

from __future__ import annotations

import uuid

from driftgate.core.redaction import redact_credentials


def new_error_id() -> str:
    return uuid.uuid4().hex[:12]


def describe_error(exc: BaseException) -> str:
    """The driver's message of ``exc`` for the log: no statement parameters, no secrets."""
    cause = getattr(exc, "orig", None)  # SQLAlchemy's DBAPIError wraps the driver error
    return redact_credentials(f"{type(exc).__name__}: {cause if cause is not None else exc}")
