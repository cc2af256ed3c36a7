"""The requests log: each /predict request's status and latency, for the monitors.

``latency_p95`` and ``error_share`` judge the running service per window, so each
request's HTTP status and latency (as the metrics middleware measured it, the whole
handler) go to ``driftgate_requests`` in the sample store. The row is written after
the response is sent: a log row is evidence, not an acknowledgement, so it must not
slow the answer. :class:`RequestLog` buffers rows in memory (bounded: beyond
``max_buffered`` rows, or ``serving.requests_log_max_per_minute`` rows in a minute, they
are dropped and counted) and one thread writes them every ``flush_seconds`` in one
transaction. A killed process loses at most the last
interval's rows. A write that fails (a store outage) keeps its rows buffered and
tries again each ``flush_seconds``: the 503s answered during an outage are exactly
what the ``error_share`` monitor must see, so they reach the store, with their own
times, once it is back (beyond ``max_buffered`` rows they are dropped and counted).
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from datetime import UTC, datetime

from sqlalchemy.exc import DisconnectionError, InterfaceError, OperationalError

from driftgate.serving.errors import describe_error
from driftgate.stores._sql import StoreError
from driftgate.stores.samples import RequestRecord

log = logging.getLogger(__name__)

# Failures of the store (an outage, a lock, a full disk, a lost connection): its rows
# are tried again. Not IntegrityError, DataError or StatementError: those are rows the
# store refuses, which would block every later row if they were put back at the front.
RETRIED = (OperationalError, InterfaceError, DisconnectionError, StoreError, OSError)


class RequestLog:
    """Buffer request rows; a thread appends them to the store every ``flush_seconds``."""

    def __init__(
        self,
        append: Callable[[Sequence[RequestRecord]], int],
        *,
        flush_seconds: float = 1.0,
        max_buffered: int = 100_000,
        max_per_minute: int = 60_000,
        on_drop: Callable[[int], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._append = append
        self.flush_seconds = flush_seconds
        self.max_buffered = max_buffered
        # A flood of requests must not fill the disk either: at most this many rows per
        # wall-clock minute (the rest dropped and counted).
        self.max_per_minute = max_per_minute
        self._clock = clock
        self._minute, self._this_minute = -1, 0
        self._buffer: deque[RequestRecord] = deque()
        # drain and give_back run on the sample writer's thread and on this log's own:
        # two threads popping one deque would race between its length and its pop.
        self._lock = threading.Lock()
        self._on_drop = on_drop or (lambda count: None)
        self._failing = False  # the last write failed (a store outage)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="request-log", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def add(self, status: int, seconds: float, event_time: datetime | None = None) -> None:
        """Queue one request's row (called on the event loop: no I/O here)."""
        minute = int(self._clock() // 60)
        if minute != self._minute:
            self._minute, self._this_minute = minute, 0
        if len(self._buffer) >= self.max_buffered or self._this_minute >= self.max_per_minute:
            self._on_drop(1)
            return
        self._this_minute += 1
        self._buffer.append(RequestRecord(event_time or datetime.now(UTC), status, seconds))

    def drain(self, limit: int = 10_000) -> list[RequestRecord]:
        """Take up to ``limit`` buffered rows (the sample writer commits them with its
        next batch: no transaction, no fsync of their own)."""
        rows = []
        with self._lock:
            while self._buffer and len(rows) < limit:
                rows.append(self._buffer.popleft())
        return rows

    def give_back(self, rows: Sequence[RequestRecord]) -> None:
        """Rows whose batch failed: buffered again (up to the bound; the rest counted)."""
        with self._lock:
            room = max(0, self.max_buffered - len(self._buffer))
            self._buffer.extendleft(reversed(rows[:room]))
        if len(rows) > room:
            self._on_drop(len(rows) - room)

    def flush(self) -> int:
        """Write what is buffered now; the rows of a failed write are buffered again
        (see :meth:`give_back`) for the next try."""
        rows = self.drain()
        if not rows:
            return 0
        try:
            written = self._append(rows)
        except RETRIED as exc:
            if not self._failing:  # once per outage, not once a second
                log.warning(
                    "request log rows not written, kept for a retry (%d buffered): %s",
                    len(rows) + len(self._buffer), describe_error(exc),
                )  # fmt: skip
            self._failing = True
            self.give_back(rows)
            return 0
        except Exception as exc:  # not the store: rows it would refuse on every retry
            log.warning("%d request log rows not written: %s", len(rows), describe_error(exc))
            self._on_drop(len(rows))
            return 0
        if self._failing:
            log.warning("request log rows written again")
            self._failing = False
        return written

    def _run(self) -> None:
        while not self._stop.wait(self.flush_seconds):
            while self.flush():
                pass

    def close(self) -> None:
        """Stop the thread and write what is left."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=10)
        while self.flush():
            pass
        if self._buffer:  # the store is still out: these rows are lost with the process
            self._on_drop(len(self._buffer))
            self._buffer.clear()
