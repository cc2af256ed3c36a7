"""Prometheus metrics of the service, in a registry of its own.

A registry per app (not the process-global default) keeps two apps in one process —
tests, or a future multi-model server — from sharing or clashing on metric names.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.exposition import CONTENT_TYPE_LATEST

log = logging.getLogger(__name__)

# A monitor's verdict on its newest window; one gauge per status (a Prometheus state set),
# so ``insufficient_data`` shows as itself, never as a pass.
MONITOR_STATUSES = ("ok", "insufficient_data", "no_data", "error")

# Paths the metrics label by name; anything else is "other" (bounded label values).
KNOWN_PATHS = frozenset(
    {"/predict", "/healthz", "/readyz", "/metrics", "/admin/pause", "/admin/resume", "/admin/state"}
)
LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)
BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 4096)


class ServiceMetrics:
    """Every metric the service exposes on ``/metrics``."""

    content_type = CONTENT_TYPE_LATEST

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.requests = Counter(
            "driftgate_http_requests", "HTTP requests by path and status code.",
            ["path", "status"], registry=r,
        )  # fmt: skip
        self.latency = Histogram(
            "driftgate_http_request_duration_seconds", "HTTP request latency by path.",
            ["path"], buckets=LATENCY_BUCKETS, registry=r,
        )  # fmt: skip
        self.records = Counter(
            "driftgate_predicted_records", "Records scored and acknowledged.", registry=r
        )
        self.unstored_records = Counter(
            "driftgate_unstored_records",
            "Records answered without being stored (on_store_failure=answer_unlogged).",
            registry=r,
        )
        self.unsampled_records = Counter(
            "driftgate_unsampled_records",
            "Records answered and deliberately not stored (serving.sample_fraction).",
            registry=r,
        )
        self.invalid_records = Counter(
            "driftgate_invalid_records", "Records refused by validation (422).", registry=r
        )
        self.paused = Gauge(
            "driftgate_inference_paused", "1 while inference is paused.", registry=r
        )
        self.paused_requests = Counter(
            "driftgate_paused_requests", "Prediction requests refused because of a pause.",
            registry=r,
        )  # fmt: skip
        self.pauses = Counter(
            "driftgate_pauses", "Pauses observed by this process (switch flipped on).",
            registry=r,
        )  # fmt: skip
        self.samples_written = Counter(
            "driftgate_samples_written",
            "Samples and rejected records durably committed to the sample store.",
            registry=r,
        )  # fmt: skip
        self.sample_write_errors = Counter(
            "driftgate_sample_write_errors", "Failed sample commits (batches).", registry=r
        )
        self.batch_requests = Histogram(
            "driftgate_sample_batch_requests", "Requests per group commit.",
            buckets=BATCH_BUCKETS, registry=r,
        )  # fmt: skip
        self.batch_samples = Histogram(
            "driftgate_sample_batch_samples", "Samples per group commit.",
            buckets=BATCH_BUCKETS, registry=r,
        )  # fmt: skip
        self.commit_seconds = Histogram(
            "driftgate_sample_commit_seconds", "Duration of one group commit.",
            buckets=LATENCY_BUCKETS, registry=r,
        )  # fmt: skip
        self.model_reloads = Counter(
            "driftgate_model_reloads", "Champion load attempts by outcome.", ["outcome"],
            registry=r,
        )  # fmt: skip
        self.rejected_records = Counter(
            "driftgate_rejected_records",
            "Refused (422) records durably stored as rejected traffic.", registry=r,
        )  # fmt: skip
        self.rejected_overflow_records = Counter(
            "driftgate_rejected_overflow_records",
            "Refused records not stored because of serving.rejected_max_per_minute "
            "(counted in the store too).", registry=r,
        )  # fmt: skip
        self.rejected_unstored_records = Counter(
            "driftgate_rejected_unstored_records",
            "Refused records whose storing failed (the store could not take them).",
            registry=r,
        )  # fmt: skip
        self.request_log_dropped = Counter(
            "driftgate_request_log_dropped",
            "Request log rows (status, latency) lost: buffer full or write failed.",
            registry=r,
        )  # fmt: skip
        self.model_version = Gauge(
            "driftgate_model_version", "Version of the champion being served.", registry=r
        )

    def watch_monitors(self, read_statuses: Callable[[], list[dict]]) -> None:
        """Expose each monitor's latest verdict (read from the monitor state store at
        every scrape: the drift check runs in another process)."""
        self.registry.register(MonitorStatusCollector(read_statuses))

    def record_commit(self, requests: int, samples: int, seconds: float) -> None:
        self.samples_written.inc(samples)
        self.batch_requests.observe(requests)
        self.batch_samples.observe(samples)
        self.commit_seconds.observe(seconds)

    def render(self) -> bytes:
        return generate_latest(self.registry)


class MonitorStatusCollector:
    """The drift check's latest verdict per monitor, as gauges labelled by monitor.

    A store that cannot be read makes ``driftgate_monitor_status_readable`` 0 and the
    scrape still answers: the monitors' store never decides whether the service works.
    """

    def __init__(self, read_statuses: Callable[[], list[dict]]) -> None:
        self.read_statuses = read_statuses

    def describe(self):  # no read at registration time
        return []

    def collect(self):
        readable = GaugeMetricFamily(
            "driftgate_monitor_status_readable",
            "1 when the monitors' latest verdicts could be read from their store.",
        )
        try:
            statuses = self.read_statuses()
        except Exception as exc:  # logged; the scrape goes on without the verdicts
            log.warning("cannot read the monitors' latest verdicts: %s", exc)
            readable.add_metric([], 0)
            yield readable
            return
        readable.add_metric([], 1)
        yield readable
        labels = ["monitor", "metric", "model_version"]
        status = GaugeMetricFamily(
            "driftgate_monitor_status",
            "1 for the status of the monitor's newest judged window (ok, insufficient_data, "
            "no_data, error), 0 for the others.",
            labels=[*labels, "status"],
        )
        figures = {
            "breached": "1 when the newest window breached the monitor's rule.",
            "fired": "1 when the newest window fired the monitor's action.",
            "observed": "The monitor's observed value on its newest window.",
            "p_value": "The p-value of the newest window's calibrated decision.",
            "level": "The per-feature level that p-value was compared with.",
            "window_end_seconds": "End of the newest window judged (Unix time).",
        }
        families = {
            name: GaugeMetricFamily(f"driftgate_monitor_{name}", text, labels=labels)
            for name, text in figures.items()
        }
        for row in statuses:
            values = [row["monitor"], row["metric"], str(row["model_version"])]
            for name in MONITOR_STATUSES:
                status.add_metric([*values, name], 1.0 if row["status"] == name else 0.0)
            for name, family in families.items():
                if row.get(name) is not None:
                    family.add_metric(values, float(row[name]))
        yield status
        yield from families.values()


class MetricsMiddleware:
    """Pure ASGI middleware: count every HTTP response and time it.

    Pure ASGI rather than Starlette's ``BaseHTTPMiddleware``, which adds a task and a
    stream per request on the hot path.
    """

    def __init__(self, app, metrics: ServiceMetrics, on_request=None) -> None:
        self.app = app
        self.metrics = metrics
        # Called with (path, status, seconds, scope) after each response (the requests log).
        self.on_request = on_request
        # The labelled children, bound once per (path, status) and path: ``labels()``
        # takes the metric's lock and builds its key on every call. Bounded: paths are
        # KNOWN_PATHS or "other", statuses the few the service answers.
        self._counted: dict[tuple[str, int], object] = {}
        self._timed: dict[str, object] = {}

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = scope["path"] if scope["path"] in KNOWN_PATHS else "other"
        started = time.perf_counter()
        status = [500]

        async def send_and_capture(message) -> None:
            if message["type"] == "http.response.start":
                status[0] = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, send_and_capture)
        finally:
            elapsed = time.perf_counter() - started
            code = status[0]
            counted = self._counted.get((path, code))
            if counted is None:
                counted = self._counted[path, code] = self.metrics.requests.labels(path, str(code))
            counted.inc()
            timed = self._timed.get(path)
            if timed is None:
                timed = self._timed[path] = self.metrics.latency.labels(path)
            timed.observe(elapsed)
            if self.on_request is not None:
                self.on_request(path, code, elapsed, scope)
