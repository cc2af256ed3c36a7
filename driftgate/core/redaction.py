"""Keep credentials out of messages, logs, HTTP answers and MLflow.

URLs may carry a password or a token in their user info
(``postgresql://user:PASSWORD@host/db``, ``http://user:TOKEN@mlflow:5000``), and
third-party errors quote the URL they failed on (MLflow's "API request to http://...
failed"). Every such text passes through :func:`redact_credentials` before driftgate
prints, logs, answers or records it.
"""

from __future__ import annotations

import re

# scheme://USERINFO@ -> scheme://***@ ; greedy up to the last "@" before the path, so a
# password holding an unescaped "@" is masked whole.
_USERINFO = re.compile(r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.\-]*://)[^\s/]*@")

MASK = "***"


def redact_credentials(text: str) -> str:
    """``text`` with the user info of every URL in it replaced by ``***``."""
    return _USERINFO.sub(rf"\g<scheme>{MASK}@", text)
