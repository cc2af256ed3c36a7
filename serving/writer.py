"""Group commit of samples: many requests, one transaction, no acknowledged loss.

Each request hands its samples to :meth:`GroupCommitWriter.submit` and waits on the
returned future before answering. One writer thread takes every request queued so
far (up to ``max_batch_samples``, waiting at most ``max_wait_seconds`` for more once it
has one), appends them in a single transaction and only then resolves their futures.
So a response is sent only after its samples are committed: a process killed at any
moment loses only requests that were never answered. The cost of a durable commit
(an fsync) is shared by the whole batch, which is what makes ``synchronous=FULL``
affordable.

A failed commit fails every request of its batch (they are answered 503 and were not
stored); the writer goes on with the next batch. The thread is supervised: whatever a
batch raises is logged and the loop goes on, so one bad batch never stops sample
writing; a request whose waiter gave up (its handler timed out and answered 503) is
dropped before its batch is committed — it can no longer be cancelled once taken.
If the thread dies anyway, :attr:`alive` turns false and ``/healthz`` fails, so a
liveness probe restarts the process.

Request ids are unique in the store: a request whose id is already stored, or was
taken by an earlier request of the same batch, fails with
:class:`~driftgate.stores.samples.DuplicateRequestIds` (the service answers 409) and
the rest of its batch is committed.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, InvalidStateError
from dataclasses import dataclass

from driftgate.serving.errors import describe_error
from driftgate.stores.samples import DuplicateRequestIds, Sample

log = logging.getLogger(__name__)


class WriterOverloaded(RuntimeError):
    """Too many requests are waiting for a commit; the caller should shed load."""


class WriterClosed(RuntimeError):
    """The writer is shutting down and accepts no more samples."""


@dataclass
class _Pending:
    samples: Sequence[Sample]
    future: Future


_STOP = object()


class GroupCommitWriter:
    """One thread that commits queued samples in batches.

    Args:
        append: Stores a batch durably, all or nothing (e.g. ``SqlSampleStore.append``);
            raises DuplicateRequestIds, storing nothing, for ids already stored.
        max_batch_samples: Most samples per transaction (a request is never split).
        max_wait_seconds: Once a batch has a request, how long to wait for more.
        max_pending_requests: Bound of the queue; beyond it :meth:`submit` refuses.
        on_commit: Called with ``(requests, samples, seconds)`` after each commit.
        on_error: Called with the exception after each failed commit.
    """

    def __init__(
        self,
        append: Callable[[list[Sample]], int],
        *,
        max_batch_samples: int = 512,
        max_wait_seconds: float = 0.001,
        max_pending_requests: int = 10_000,
        on_commit: Callable[[int, int, float], None] | None = None,
        on_error: Callable[[BaseException], None] | None = None,
    ) -> None:
        self._append = append
        self.max_batch_samples = max_batch_samples
        self.max_wait_seconds = max_wait_seconds
        self._queue: queue.Queue = queue.Queue(maxsize=max_pending_requests)
        self._on_commit = on_commit or (lambda requests, samples, seconds: None)
        self._on_error = on_error or (lambda exc: None)
        self._closed = threading.Event()
        self._thread = threading.Thread(target=self._run, name="sample-writer", daemon=True)
        self._started = False

    def start(self) -> None:
        self._thread.start()
        self._started = True

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    def pending(self) -> int:
        return self._queue.qsize()

    def submit(self, samples: Sequence[Sample]) -> Future:
        """Queue ``samples``; the future resolves (to the batch size) once they are durable."""
        if self._closed.is_set() or not self._started:
            raise WriterClosed("the sample writer is not running")
        future: Future = Future()
        try:
            self._queue.put_nowait(_Pending(samples, future))
        except queue.Full:
            raise WriterOverloaded(
                f"{self._queue.maxsize} requests already wait for the sample store"
            ) from None
        return future

    def close(self, timeout: float = 30.0) -> None:
        """Refuse new samples, commit everything already queued, stop the thread."""
        if self._closed.is_set():
            return
        self._closed.set()
        if self._started:
            self._queue.put(_STOP)  # behind every queued request: they are committed first
            self._thread.join(timeout=timeout)
        # A submit racing with close may have queued behind the stop marker: fail it
        # rather than leave its request waiting forever (it was not acknowledged).
        while True:
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                break
            if item is not _STOP:
                _resolve(item.future, exception=WriterClosed("the sample writer stopped"))

    def _next_batch(self) -> tuple[list[_Pending], bool]:
        first = self._queue.get()
        if first is _STOP:
            return [], True
        batch, size = [], 0
        if _take(first):
            batch, size = [first], len(first.samples)
        deadline = time.monotonic() + self.max_wait_seconds
        while size < self.max_batch_samples:
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                try:
                    item = self._queue.get(timeout=remaining)
                except queue.Empty:
                    break
            if item is _STOP:
                return batch, True
            if _take(item):
                batch.append(item)
                size += len(item.samples)
        return batch, False

    def _run(self) -> None:
        stopping = False
        while not stopping:
            batch: list[_Pending] = []
            try:
                batch, stopping = self._next_batch()
                if batch:
                    self._commit(_unique_ids(batch))
            except Exception as exc:  # supervised: a bad batch must not end sample writing
                log.exception("the sample writer recovered from an error")
                for pending in batch:
                    _resolve(pending.future, exception=exc)

    def _commit(self, batch: list[_Pending]) -> None:
        if not batch:
            return
        samples = [sample for pending in batch for sample in pending.samples]
        started = time.perf_counter()
        try:
            written = self._append(samples)
        except DuplicateRequestIds as exc:
            for pending in batch:
                if _is_duplicate(pending, exc.request_ids):
                    _resolve(
                        pending.future,
                        exception=DuplicateRequestIds({pending.samples[0].request_id}),
                    )
            rest = [p for p in batch if not _is_duplicate(p, exc.request_ids)]
            self._commit(rest)
            return
        except Exception as exc:
            # The detail goes to the server log only; its text may quote other requests.
            log.error("sample commit of %d samples failed: %s", len(samples), describe_error(exc))
            self._on_error(exc)
            for pending in batch:
                _resolve(pending.future, exception=exc)
            return
        # Rows written (samples and rejected records; an overflow count is no row).
        rows = written if isinstance(written, int) else len(samples)
        self._on_commit(len(batch), rows, time.perf_counter() - started)
        for pending in batch:
            _resolve(pending.future, result=len(samples))


def _take(pending: _Pending) -> bool:
    """Claim a queued request for a commit; False if its waiter already gave up."""
    return pending.future.set_running_or_notify_cancel()


def _unique_ids(batch: list[_Pending]) -> list[_Pending]:
    """The batch without requests reusing an id taken earlier in it (those fail)."""
    seen: set[str] = set()
    kept = []
    for pending in batch:
        if not _is_accepted(pending):  # rejected traffic: ids need not be unique
            kept.append(pending)
            continue
        request_id = pending.samples[0].request_id if pending.samples else None
        if request_id in seen:
            _resolve(pending.future, exception=DuplicateRequestIds({request_id}))
            continue
        seen.add(request_id)
        kept.append(pending)
    return kept


def _is_accepted(pending: _Pending) -> bool:
    """Scored samples (unique request ids), not rejected records or overflow counts."""
    return bool(pending.samples) and isinstance(pending.samples[0], Sample)


def _is_duplicate(pending: _Pending, known: set[str]) -> bool:
    return _is_accepted(pending) and pending.samples[0].request_id in known


def _resolve(future: Future, *, result=None, exception: BaseException | None = None) -> None:
    try:
        if exception is not None:
            future.set_exception(exception)
        else:
            future.set_result(result)
    except InvalidStateError:  # already resolved or cancelled: nobody waits for it
        pass
