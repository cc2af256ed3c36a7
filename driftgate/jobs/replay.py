"""``driftgate replay``: a production file through the running service, then its labels.

Each row goes to ``POST /predict`` (real HTTP) in event time order (``data.time_column``;
file order without one), one record per request, with its time as the request's event
time and a request id derived from the row's id column (``data.labels.key`` or
``--key``): ``replay-<id>``. The service answers 409 for an id it has already logged,
so a rerun of the same file is idempotent and resumes where an interrupted one stopped:
those rows are counted as *already sent*, not as errors.

The labels (``data.labels``, keyed by the same id column, or the file's own target
column) reach ``POST /feedback`` with a bearer token once the replay is ``labels_after``
past the row's event time, in batches; the ones still waiting at the end of the file
are sent then. A label of a request answered 200 or 409 is sent (a rerun re-sends it:
the service counts the same label again as a duplicate), never one of a refused record.

Only what the service acknowledged counts: a Ctrl-C stops between requests, and the
rerun sends the rest (and re-sends any label that was waiting).
"""

from __future__ import annotations

import hashlib
import os
import re
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from driftgate import registry
from driftgate.config import ProjectConfig
from driftgate.core.errors import EXIT_CHECK_FAILED, DriftgateError
from driftgate.jobs.data import load_production_file

Say = Callable[[str], None]

REQUEST_ID_PREFIX = "replay-"
# What the service takes as X-Request-ID (serving.responses), less room for the prefix.
_ID_TEXT = re.compile(r"^[A-Za-z0-9._:\-]{1,100}$")
LABEL_BATCH = 64
PROGRESS_SECONDS = 5.0
# A 429 (rate limit) is waited out this many times per request before the replay stops.
MAX_RATE_LIMITED = 20


class ReplayError(DriftgateError):
    """The replay cannot start or go on; the message names the file, column or answer."""


class ServiceLost(ReplayError):
    """The service stopped answering mid-replay; a rerun resumes."""

    exit_code = EXIT_CHECK_FAILED


@dataclass
class ReplayCounts:
    rows: int = 0  # rows in the file
    sent: int = 0  # rows sent this run
    accepted: int = 0  # 200: scored and logged
    refused: int = 0  # 422: refused (the service stores them as rejected records)
    already_sent: int = 0  # 409: logged by an earlier run of the replay
    unavailable: int = 0  # 503: paused or not storing; not logged, a rerun sends them
    failed: int = 0  # any other answer
    labels_sent: int = 0
    labels_accepted: int = 0  # stored now (accepted or corrected)
    labels_duplicates: int = 0  # the same label was stored already (a rerun)
    labels_unsampled: int = 0  # the service did not log the request (sample_fraction)
    labels_refused: int = 0  # unknown, late, invalid or conflicting: nothing stored

    def line(self, seconds: float) -> str:
        rate = self.sent / seconds if seconds > 0 else 0.0
        text = (
            f"{self.sent}/{self.rows} rows sent: {self.accepted} accepted, {self.refused} "
            f"refused (422), {self.already_sent} already sent (409), {self.unavailable} "
            f"unavailable (503)"
        )
        if self.failed:
            text += f", {self.failed} failed"
        text += f"; {rate:.1f} rows/s"
        if self.labels_sent:
            text += (
                f"; labels: {self.labels_accepted} accepted, {self.labels_duplicates} "
                f"already stored, {self.labels_refused} refused"
            )
        return text


@dataclass
class ReplayOutcome:
    counts: ReplayCounts
    seconds: float
    interrupted: bool = False
    problems: list[str] = field(default_factory=list)  # the first refusals, as the service said

    @property
    def complete(self) -> bool:
        return not self.interrupted and not self.counts.failed and not self.counts.labels_refused


@dataclass(frozen=True)
class ProductionRows:
    """A production file ready to replay: rows in event time order."""

    path: str
    frame: pd.DataFrame
    key: str
    time: str | None
    labels: pd.Series | None  # the label of each row (NaN: none), aligned with frame


def request_id_for(key_value: object) -> str:
    """The request id of a row: ``replay-<id>``, the id as written when the service
    takes it as an ``X-Request-ID``, else a digest of it (same id, same request id)."""
    text = str(_plain(key_value))
    if _ID_TEXT.match(text):
        return REQUEST_ID_PREFIX + text
    return REQUEST_ID_PREFIX + hashlib.sha256(text.encode()).hexdigest()[:40]


def load_production(
    config: ProjectConfig, path: str | Path | None = None, key: str | None = None
) -> ProductionRows:
    """The rows to replay: ``path`` (default ``data.production``), its time column
    parsed, its labels joined by ``data.labels`` (or its own target column), sorted by
    event time."""
    settings = config.data
    if path is None:
        if settings.production is None:
            raise ReplayError(
                "no production file: give FILE (driftgate replay FILE) or set data.production"
            )
        path = settings.production
    path = str(config.resolve(path))
    if not Path(path).is_file():
        raise ReplayError(f"{path}: no such file")
    key = key or (settings.labels.key if settings.labels is not None else None)
    if key is None:
        raise ReplayError(
            "driftgate replay needs the id column of the records (each request id is "
            "derived from it): set data.labels.key or pass --key COLUMN"
        )
    frame = load_production_file(settings, path)
    if key not in frame.columns:
        raise ReplayError(
            f"{path}: id column '{key}' not found ("
            f"{'data.labels.key' if settings.labels and settings.labels.key == key else '--key'})"
        )
    missing = frame[key].isna()
    if missing.any():
        raise ReplayError(
            f"{path}: id column '{key}' is empty in row {int(missing.to_numpy().nonzero()[0][0])}"
        )
    ids = frame[key].map(request_id_for)
    repeated = ids.duplicated()
    if repeated.any():
        raise ReplayError(
            f"{path}: id column '{key}' repeats (e.g. {_plain(frame[key][repeated].iloc[0])!r}); "
            "each record needs its own id (the request id is derived from it)"
        )
    time_column = settings.time
    if time_column is not None:
        if time_column not in frame.columns:
            raise ReplayError(f"{path}: time column '{time_column}' (data.time_column) not found")
        # Stable: rows at the same time keep their file order.
        frame = frame.sort_values(time_column, kind="mergesort").reset_index(drop=True)
    labels = frame[settings.target] if settings.target in frame.columns else None
    return ProductionRows(path, frame, key, time_column, labels)


def event_time(value) -> pd.Timestamp:
    """A time column value as UTC (a naive time is taken as UTC, as the service does)."""
    stamp = pd.Timestamp(value)
    return stamp.tz_localize("UTC") if stamp.tzinfo is None else stamp.tz_convert("UTC")


def model_features(config: ProjectConfig, client) -> tuple[str, list[str]]:
    """The version the service serves (its ``/readyz``) and that version's features."""
    import httpx

    try:
        answer = client.get("/readyz", timeout=10)
    except httpx.HTTPError as exc:
        raise ReplayError(
            f"cannot reach the service at {client.base_url}: {exc} (start it with "
            "`driftgate serve`, or pass --url)"
        ) from None
    version = answer.json().get("model_version") if answer.status_code == 200 else None
    if version is None:
        raise ReplayError(
            f"the service at {client.base_url} is not ready (HTTP {answer.status_code}: "
            f"{answer.text[:200]})"
        )
    return str(version), registry.version_features(config.tracking, config.model.name, version)


def replay_file(
    config: ProjectConfig,
    path: str | Path | None = None,
    *,
    url: str | None = None,
    rate: float | None = None,
    labels_after: pd.Timedelta | None = None,
    key: str | None = None,
    send_labels: bool = True,
    token: str | None = None,
    say: Say = print,
    progress_seconds: float = PROGRESS_SECONDS,
) -> ReplayOutcome:
    """Send ``path`` through the service at ``url`` and deliver its labels (module doc).

    ``rate``: at most this many rows a second (None: as fast as the service answers).
    ``labels_after``: event time between a request and its label (None: at once).
    ``token``: the bearer token for ``POST /feedback`` (default: the admin token from
    ``$serving.admin_token_env``).
    """
    import httpx

    rows = load_production(config, path, key)
    settings = config.serving
    url = url or f"http://{settings.host}:{settings.port}"
    frame, counts = rows.frame, ReplayCounts(rows=len(rows.frame))
    labelled = send_labels and rows.labels is not None and rows.labels.notna().any()
    if labels_after is not None and labels_after > pd.Timedelta(0) and rows.time is None:
        raise ReplayError("--labels-after is in event time: it needs data.time_column")
    if labelled:
        token = token or os.environ.get(settings.admin_token_env)
        if not token and settings.feedback_auth != "none":
            raise ReplayError(
                f"the labels go to POST /feedback, which needs a bearer token: set "
                f"${settings.admin_token_env} (serving.admin_token_env) as the service has "
                "it, or pass --no-labels"
            )
    client = httpx.Client(base_url=url, timeout=30)
    try:
        version, features = model_features(config, client)
        absent = [name for name in features if name not in frame.columns]
        if absent:
            raise ReplayError(
                f"{rows.path}: feature column(s) of {config.model.name} v{version} not "
                f"found: {', '.join(absent)}"
            )
        say(
            f"replaying {len(frame)} rows of {rows.path} to {url} (v{version}), in "
            f"{'order of ' + rows.time if rows.time else 'file order'}, request ids from "
            f"'{rows.key}'"
            + (f"; labels {_delay_text(labels_after)} after their requests" if labelled else "")
        )
        sender = ReplaySender(client, counts, token if labelled else None, labels_after)
        outcome = ReplayOutcome(counts, 0.0, problems=sender.problems)
        started = last_said = time.monotonic()
        try:
            for position in range(len(frame)):
                if rate:
                    wait = started + position / rate - time.monotonic()
                    if wait > 0:
                        time.sleep(wait)
                row = frame.iloc[position]
                when = event_time(row[rows.time]) if rows.time else None
                record = {name: _plain(row[name]) for name in features}
                label = rows.labels.iloc[position] if labelled else None
                sender.predict(request_id_for(row[rows.key]), record, when, label)
                if labelled and when is not None:
                    sender.send_due(when)
                if time.monotonic() - last_said >= progress_seconds:
                    last_said = time.monotonic()
                    say("  " + counts.line(last_said - started))
            if labelled:
                sender.send_due(None)
        except KeyboardInterrupt:
            outcome.interrupted = True
        outcome.seconds = time.monotonic() - started
        return outcome
    finally:
        client.close()


def _delay_text(delay: pd.Timedelta | None) -> str:
    return "at once" if not delay else f"{delay} (event time)"


class ReplaySender:
    """The HTTP side of a replay: one request per row, labels in batches once due (the
    demo's year-by-year replay sends through it too)."""

    def __init__(self, client, counts: ReplayCounts, token: str | None, delay) -> None:
        self.client, self.counts = client, counts
        self.headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.flushed = time.monotonic()
        self.delay = delay or pd.Timedelta(0)
        self.waiting: deque = deque()  # (due, label item), in due order
        self.problems: list[str] = []

    def predict(self, request_id: str, record: dict, when, label) -> None:
        import httpx

        body: dict = {"records": [record]}
        if when is not None:
            body["timestamp"] = when.isoformat()
        for _ in range(MAX_RATE_LIMITED):
            try:
                answer = self.client.post(
                    "/predict", json=body, headers={"X-Request-ID": request_id}
                )
            except httpx.HTTPError as exc:
                raise ServiceLost(
                    f"lost the service at {self.client.base_url} after {self.counts.sent} "
                    f"rows: {exc}; run the same command again to resume"
                ) from None
            if answer.status_code != 429:
                break
            time.sleep(float(answer.headers.get("Retry-After") or 1))
        self.counts.sent += 1
        status = answer.status_code
        if status == 422 and "client timestamps are not accepted" in answer.text:
            raise ReplayError(
                "the service does not accept client timestamps, so the rows would be "
                "logged at the time they are sent, not their event time: set "
                "serving.accept_client_timestamps: true and restart it"
            )
        if status in (200, 409):
            if status == 200:
                self.counts.accepted += 1
            else:
                self.counts.already_sent += 1
            if label is not None and not _missing(label):
                item = {"request_id": request_id, "record_index": 0, "label": _plain(label)}
                self.waiting.append(((when + self.delay) if when is not None else None, item))
        elif status == 422:
            self.counts.refused += 1
            self._problem(f"{request_id}: HTTP 422 {answer.text[:300]}")
        elif status == 503:
            self.counts.unavailable += 1
            self._problem(f"{request_id}: HTTP 503 {answer.text[:300]}")
        else:
            self.counts.failed += 1
            self._problem(f"{request_id}: HTTP {status} {answer.text[:300]}")

    def send_due(self, now, *, wait: bool = False) -> None:
        """Send the labels due by event time ``now`` (all of them: None): in batches
        of ``LABEL_BATCH``, or what is due once a second, so that a label reaches the
        service about when it is due without one request per label; ``wait``: every due
        label now (before a check that should see them)."""

        def due() -> int:
            return sum(1 for when, _ in self.waiting if when is None or now is None or when <= now)

        ready = due()
        held = not wait and ready < LABEL_BATCH and time.monotonic() - self.flushed < 1.0
        if now is not None and held:
            return
        while ready:
            batch = [self.waiting.popleft()[1] for _ in range(min(ready, LABEL_BATCH))]
            self._feedback(batch)
            ready -= len(batch)
        self.flushed = time.monotonic()

    def _feedback(self, batch: list[dict]) -> None:
        """POST a batch; the labels the service refused are counted and the rest sent
        again (a refusal stores nothing of its request)."""
        import httpx

        while batch:
            try:
                answer = self.client.post("/feedback", json=batch, headers=self.headers)
            except httpx.HTTPError as exc:
                raise ServiceLost(
                    f"lost the service at {self.client.base_url} while sending labels: "
                    f"{exc}; run the same command again to resume"
                ) from None
            status = answer.status_code
            if status == 200:
                body = answer.json()
                self.counts.labels_sent += len(batch)
                self.counts.labels_accepted += body.get("accepted", 0) + body.get("corrected", 0)
                self.counts.labels_duplicates += body.get("duplicates", 0)
                self.counts.labels_unsampled += body.get("unsampled", 0)
                return
            if status in (401, 403):
                raise ReplayError(
                    f"POST /feedback: HTTP {status} {answer.text[:200]}: the bearer token is "
                    "not accepted (the service's serving.admin_token_env or a label source's)"
                )
            errors = answer.json().get("errors") if status in (404, 409, 422) else None
            refused = {e["record"] for e in errors or () if isinstance(e.get("record"), int)}
            if not refused:
                raise ServiceLost(f"POST /feedback: HTTP {status} {answer.text[:300]}")
            for error in errors:
                if error.get("record") in refused:
                    self._problem(
                        f"label of {error.get('request_id')}: HTTP {status} {error.get('reason')}"
                    )
            self.counts.labels_sent += len(refused)
            self.counts.labels_refused += len(refused)
            batch = [item for position, item in enumerate(batch) if position not in refused]

    def _problem(self, text: str) -> None:
        if len(self.problems) < 20:
            self.problems.append(text)


def _missing(value) -> bool:
    return value is None or (isinstance(value, float) and value != value) or value is pd.NA


def _plain(value):
    """A cell as the JSON value a client sends: numpy scalars to Python, NaN to null,
    a whole float id or label (how CSV gives an integer column with gaps) to int."""
    if value is None or value is pd.NA or value is pd.NaT:
        return None
    if hasattr(value, "item"):
        value = value.item()
    if isinstance(value, float):
        if value != value:
            return None
        if value.is_integer() and abs(value) < 2**53:
            return int(value)
    return value
