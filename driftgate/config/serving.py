"""Settings of the inference service: the ``serving:`` section of ``driftgate.yaml``.

Every field has a default, so a project without the section serves with local SQLite
stores under its ``home``. Store URLs may name PostgreSQL
(``postgresql://user@host/db``); both stores may share one database.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Literal

import pandas as pd
from pydantic import Field, field_validator

from driftgate.core.yamlconfig import StrictModel
from driftgate.training.evaluate import DECISION_THRESHOLD

ADMIN_TOKEN_ENV = "DRIFTGATE_ADMIN_TOKEN"
_RETENTION = re.compile(r"^(\d+)([hd])$")
SOURCE_NAME = re.compile(r"[a-z][a-z0-9._-]{0,63}")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")
# Sources no label_sources entry may be called: the admin token's, and no one's.
ADMIN_SOURCE, UNVERIFIED_SOURCE = "admin", "unverified"
RESERVED_SOURCES = (ADMIN_SOURCE, UNVERIFIED_SOURCE)


def parse_retention(text: str) -> pd.Timedelta:
    """``30d`` / ``12h`` -> Timedelta (at least one hour)."""
    match = _RETENTION.match(str(text).strip())
    if match is None:
        raise ValueError(f"'{text}' is not a retention: digits and h or d (e.g. 30d, 72h)")
    length = pd.Timedelta(int(match[1]), unit=match[2])
    if length < pd.Timedelta(hours=1):
        raise ValueError(f"retention '{text}' is shorter than 1h")
    return length


class ServingSettings(StrictModel):
    """How the service is bound, where it writes, how it batches and how often it polls."""

    host: str = Field("127.0.0.1", description="bind address; loopback unless told otherwise")
    port: int = Field(8080, ge=0, le=65535)
    sample_store_url: str | None = Field(None, description="default: sqlite:///<home>/samples.db")
    control_store_url: str | None = Field(
        None, description="pause switch and audit log; default: sqlite:///<home>/control.db"
    )
    on_store_failure: Literal["fail_closed", "answer_unlogged"] = Field(
        "fail_closed",
        description="when a sample cannot be stored: refuse the request (503, nothing "
        "answered that is not recorded) or answer it with sample_stored=false",
    )
    sqlite_synchronous: Literal["FULL", "NORMAL"] = Field(
        "FULL",
        description="FULL: a commit survives power loss; NORMAL: only a killed process",
    )
    contract: str | None = Field(
        None, description="contract for per-record validation; default: the project's data.contract"
    )
    backend: Literal["pyfunc", "onnxruntime"] = Field(
        "pyfunc",
        description="what scores the champion: its MLflow model (pt2), or the ONNX model "
        "the gate exported (export_parity format onnx) in ONNX Runtime; a champion "
        "without one is refused, never served on pyfunc instead",
    )
    onnx_intra_op_threads: int = Field(
        1, ge=0, description="onnxruntime: threads within one operator (0: ONNX Runtime's choice)"
    )
    onnx_inter_op_threads: int = Field(
        1, ge=0, description="onnxruntime: threads across operators (0: ONNX Runtime's choice)"
    )
    model_poll_seconds: float = Field(
        10.0, gt=0, description="how often the champion alias is re-read"
    )
    pause_poll_seconds: float = Field(
        1.0,
        ge=0,
        description="how often the pause switch is re-read; 0: on every request",
    )
    batch_max_samples: int = Field(
        512, ge=1, description="group commit: most samples in one transaction"
    )
    batch_max_wait_ms: float = Field(
        1.0,
        ge=0,
        description="group commit: how long a batch waits for more requests once it has one",
    )
    max_pending_requests: int = Field(
        10_000, ge=1, description="requests waiting for a commit before new ones get 503"
    )
    max_records_per_request: int = Field(1_000, ge=1)
    max_body_bytes: int = Field(
        16 * 1024 * 1024,
        ge=1,
        description="larger request bodies get 413 before they are read into memory",
    )
    decision_threshold: float = Field(
        DECISION_THRESHOLD, gt=0.0, lt=1.0, description="class 1 when P(class 1) >= this"
    )
    accept_client_timestamps: bool = Field(
        False,
        description="accept a request-level `timestamp` (event time, e.g. for replays)",
    )
    sample_fraction: float = Field(
        1.0,
        gt=0.0,
        le=1.0,
        description="share of requests whose samples are logged, chosen by a hash of the "
        "request id (the same id always gets the same answer); each stored sample "
        "records it, so windows count the requests behind their samples",
    )
    sample_retention: str | None = Field(
        None,
        description="samples older than this (event time, e.g. 30d) are removed by "
        "`driftgate samples purge` / the sample-retention deployment; unset: kept",
    )
    log_rejected: bool = Field(
        True,
        description="store the records refused with 422 (contract or model rules) in the "
        "sample store, marked rejected with the rule and field, never scored; the 422 is "
        "sent once they are durable (issue 16: rejected traffic is traffic)",
    )
    rejected_max_per_minute: int = Field(
        6_000,
        ge=0,
        description="most rejected records one service process stores per minute; beyond "
        "it they are counted (per minute, in the store and on /metrics), not stored",
    )
    rejected_max_bytes_per_minute: int = Field(
        3 * 1024 * 1024,
        ge=0,
        description="most bytes of rejected records one service process stores per "
        "minute, each row measured as stored (its values plus 192 bytes of row overhead); "
        "beyond it they are counted like the rows over rejected_max_per_minute, so a flood "
        "of junk cannot fill the disk (a row may be 0.8 KB or 5 KB: rows alone do not "
        "bound the bytes)",
    )
    log_requests: bool = Field(
        True,
        description="log each /predict request's status and latency in the sample store "
        "(the latency_p95 and error_share monitors)",
    )
    requests_log_max_per_minute: int = Field(
        60_000,
        ge=0,
        description="most requests-log rows written per minute and process; beyond it "
        "rows are dropped and counted (driftgate_request_log_dropped), so a flood cannot "
        "fill the disk",
    )
    client_id_header: str | None = Field(
        None,
        pattern=r"^[A-Za-z0-9!#$%&'*+.^_`|~-]{1,64}$",
        description="the header naming the caller (e.g. X-Forwarded-For behind a trusted "
        "proxy; its last comma-separated entry, the one the nearest proxy appended); unset: "
        "the peer address. A header is only as trustworthy as the proxy that sets it: "
        "reached directly, a client writes it itself. Each sample stores a keyed hash of "
        "the caller, never the address, so the drift check can tell one client's missing "
        "values from everyone's",
    )
    admin_token_env: str = Field(
        ADMIN_TOKEN_ENV, description="environment variable holding the admin bearer token"
    )
    label_horizon: str | None = Field(
        "30d",
        description="POST /feedback and `driftgate labels load` accept a label this long "
        "after its request was served (e.g. 30d, 72h); unset: any time while the sample "
        "is kept",
    )
    label_corrections: bool = Field(
        False,
        description="a different label for an already labelled record replaces it "
        "(counted as a correction) instead of being refused with 409",
    )
    feedback_auth: Literal["token", "admin_token", "none"] = Field(
        "token",
        description="token: POST /feedback needs a bearer token, the admin token (source "
        "'admin') or one of label_sources' (that source's name), stored with each label "
        "(labels move the performance monitors, which may pause inference, and the "
        "retrain's data); admin_token: its former name, the same; none: any client, its "
        "labels stored as source 'unverified' (a valid token still names its source), "
        "which a retrain never scores a candidate on",
    )
    api_docs: bool = Field(
        False,
        description="serve /docs, /redoc and /openapi.json: every endpoint, field and "
        "limit described to any client that asks; off unless you want them (development)",
    )
    opentelemetry: bool = Field(
        False,
        description="FastAPI's own OpenTelemetry spans, HTTP metrics and exception logs "
        "for each request, sent to the providers you configure (or FastAPI's "
        "FASTAPI_OTEL_AUTO_CONFIGURE); off: asking for a provider on every request was "
        "4% of the event loop's CPU (docs/serving.md), and /metrics covers the service",
    )
    metrics_auth: Literal["none", "token"] = Field(
        "none",
        description="none: /metrics answers any client (Prometheus scrapes without "
        "credentials; it holds counts and monitor verdicts, no samples, labels or "
        "secrets); token: it needs the admin token like the admin endpoints",
    )
    label_sources: dict[str, str] = Field(
        default_factory=dict,
        description="the named senders of labels: source name -> the environment "
        "variable holding its bearer token for POST /feedback",
    )

    @field_validator("label_sources")
    @classmethod
    def _sources_are_names(cls, value: dict[str, str]) -> dict[str, str]:
        for name, variable in value.items():
            if not SOURCE_NAME.fullmatch(name):
                raise ValueError(
                    f"source {name!r}: a source name is 1-64 lowercase letters, digits, "
                    "'.', '_' or '-', starting with a letter"
                )
            if name in RESERVED_SOURCES:
                raise ValueError(
                    f"source {name!r} is reserved (admin: the admin token; unverified: "
                    "labels nobody authenticated); name the sender"
                )
            if not _ENV_NAME.fullmatch(variable):
                raise ValueError(
                    f"source {name!r}: {variable!r} is not an environment variable name"
                )
        return value

    @field_validator("label_horizon")
    @classmethod
    def _horizon_parses(cls, value: str | None) -> str | None:
        if value is not None:
            parse_retention(value)
        return value

    @property
    def horizon(self) -> pd.Timedelta | None:
        """``label_horizon`` as a Timedelta (None: labels are accepted at any age)."""
        return None if self.label_horizon is None else parse_retention(self.label_horizon)

    @field_validator("sample_retention")
    @classmethod
    def _retention_parses(cls, value: str | None) -> str | None:
        if value is not None:
            parse_retention(value)
        return value

    @property
    def retention(self) -> pd.Timedelta | None:
        """``sample_retention`` as a Timedelta (None: samples are kept)."""
        return None if self.sample_retention is None else parse_retention(self.sample_retention)

    def sample_store(self, home: Path) -> str:
        """The sample store URL, defaulting to a SQLite file under ``home``."""
        return self.sample_store_url or f"sqlite:///{Path(home) / 'samples.db'}"

    def control_store(self, home: Path) -> str:
        """The control store URL, defaulting to a SQLite file under ``home``."""
        return self.control_store_url or f"sqlite:///{Path(home) / 'control.db'}"
