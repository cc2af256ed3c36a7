"""Keep credentials out of messages, logs, HTTP answers, reports and MLflow.

Credentials reach text in three shapes, and :func:`redact_credentials` masks each:

- the user info of a URL (``postgresql://user:PASSWORD@host/db``,
  ``http://user:TOKEN@mlflow:5000``);
- a parameter whose name says it is a secret, in a URL's query or a libpq-style
  ``key=value`` string (``?password=``, ``&sslpassword=``, ``token=``,
  ``access_token=``, ``api_key=``, ``apikey=``, ``secret=``, ``X-Amz-Signature=``);
- an HTTP ``Authorization`` value and any ``Bearer`` token.

Third-party errors quote the URL they failed on (MLflow's "API request to http://...
failed", a database driver's connection error), so every such text passes through
:func:`redact_credentials` before driftgate prints, logs, answers or records it;
:class:`RedactingFilter` does the same for every log record, driftgate's or a library's.
"""

from __future__ import annotations

import logging
import re

MASK = "***"

# scheme://USERINFO@ -> scheme://***@ ; greedy up to the last "@" before the path, so a
# password holding an unescaped "@" is masked whole. User info already masked by
# SQLAlchemy ("user:***@") is left as it is: redacting twice changes nothing.
_USERINFO = re.compile(
    r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.\-]*://)"
    r"(?![^\s/:@]*:\*\*\*@[^\s/@]*(?:[\s/]|$))[^\s/]*@"
)

# A parameter named like a secret, after "?", "&" or ";" (a URL query) or at the start
# of a word (a libpq DSN "host=h password=x"). Names are matched on the words that mark
# a secret, so "sslpassword", "access_token", "client_secret", "X-Amz-Signature" are
# caught without listing every driver's spelling. The value runs to the next separator.
_SECRET_NAME = (
    r"[A-Za-z0-9_.\-]*(?:password|passwd|token|secret|api[_\-]?key|signature|credential)"
    r"[A-Za-z0-9_.\-]*|pwd|sig|key"
)
_SECRET_PARAMETER = re.compile(
    rf"(?P<name>(?<![^?&;\s,'\"(\[{{])(?:{_SECRET_NAME})=)[^&\s#'\"]+",
    re.IGNORECASE,
)

# "Authorization: Bearer x", "'Authorization': 'Basic x'", "authorization=x", and a bare
# "Bearer x" (as a token is often quoted without its header name).
_AUTHORIZATION = re.compile(
    r"(?P<head>\b(?:proxy-)?authorization['\"]?\s*[:=]\s*['\"]?"
    r"(?:(?:bearer|basic|digest|token|negotiate)\s+)?)[^\s'\",}]+",
    re.IGNORECASE,
)
_BEARER = re.compile(r"(?P<head>\bbearer\s+)(?!\*\*\*)[A-Za-z0-9\-._~+/]+=*", re.IGNORECASE)


def redact_credentials(text: str) -> str:
    """``text`` with every credential of the shapes above replaced by ``***``."""
    text = _USERINFO.sub(rf"\g<scheme>{MASK}@", text)
    text = _SECRET_PARAMETER.sub(rf"\g<name>{MASK}", text)
    text = _AUTHORIZATION.sub(rf"\g<head>{MASK}", text)
    return _BEARER.sub(rf"\g<head>{MASK}", text)


def redact_record(record: logging.LogRecord) -> None:
    """Mask credentials in a log record: its message is rendered once (``msg % args``),
    redacted and stored back without arguments; its traceback text is redacted too."""
    try:
        message = record.getMessage()
    except Exception:  # a malformed format: let logging report it as it would
        return
    record.msg = redact_credentials(message)
    record.args = None
    if record.exc_info and not record.exc_text:
        record.exc_text = logging.Formatter().formatException(record.exc_info)
    if record.exc_text:
        record.exc_text = redact_credentials(record.exc_text)
    if record.stack_info:
        record.stack_info = redact_credentials(record.stack_info)


class RedactingFilter(logging.Filter):
    """A handler filter that masks credentials in every record it lets through, from
    whichever logger it comes (MLflow's, SQLAlchemy's, httpx's as well as driftgate's)."""

    def filter(self, record: logging.LogRecord) -> bool:
        redact_record(record)
        return True


def install_redacting_filter(handler: logging.Handler) -> None:
    """Add :class:`RedactingFilter` to ``handler`` once."""
    if not any(isinstance(f, RedactingFilter) for f in handler.filters):
        handler.addFilter(RedactingFilter())


def install_redacting_record_factory() -> None:
    """Mask every log record where it is made, whatever handler later writes it.

    Handler filters only cover handlers that exist when they are installed; MLflow and
    Prefect attach their own handlers (``propagate = False``) when they are imported,
    which driftgate's commands do lazily, after logging is set up. Idempotent.
    """
    current = logging.getLogRecordFactory()
    if getattr(current, "redacts_credentials", False):
        return

    def factory(*args, **kwargs) -> logging.LogRecord:
        record = current(*args, **kwargs)
        redact_record(record)
        return record

    factory.redacts_credentials = True  # type: ignore[attr-defined]
    logging.setLogRecordFactory(factory)
