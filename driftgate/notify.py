"""Post review notifications to a webhook (Slack-style JSON: ``{"text": ..., ...}``).

A failed post never loses the review: the review is stored first and the failure is
returned for the caller to report. The URL may carry a secret token, so it is never
logged; only its scheme and host are.
"""

from __future__ import annotations

import json
import logging
import urllib.error
import urllib.request
from urllib.parse import urlsplit

log = logging.getLogger(__name__)


def safe_target(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.hostname}{':' + str(parts.port) if parts.port else ''}/…"


def post_json(url: str, payload: dict, timeout: float = 5.0) -> str | None:
    """POST ``payload``; returns None on success, else a short reason."""
    request = urllib.request.Request(
        url,
        data=json.dumps(payload, default=str).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            if 200 <= response.status < 300:
                return None
            return f"webhook {safe_target(url)} answered {response.status}"
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "code", None) or getattr(exc, "reason", None) or type(exc).__name__
        log.warning("webhook %s failed: %s", safe_target(url), reason)
        return f"webhook {safe_target(url)} failed: {reason}"
