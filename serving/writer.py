"""Group commit of samples: many requests, one transaction, no acknowledged loss.

Each request hands its samples to :meth:`GroupCommitWriter.submit` and waits on the
returned future before answering. One writer thread takes every request queued so
far (up to ``max_batch_samples``, after sleeping ``max_wait_seconds`` for more once it
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

The hand-off is lean, because every request pays it on the event loop: a request is
put on a ``queue.SimpleQueue`` (C; it takes no lock per request, and signals only a
writer that sleeps waiting for work). Once the writer has a request it sleeps
``max_wait_seconds`` and then takes everything queued, rather than waking for each
request as it arrives.
The service's handler waits on an ``asyncio`` future (:meth:`GroupCommitWriter.
submit_async`): after a commit, the writer settles all of its batch's futures with one
call into their event loop, instead of one cross-thread wake-up per request.

Request ids are unique in the store: a request whose id is already stored, or was
taken by an earlier request of the same batch, fails with
:class:`~driftgate.stores.samples.DuplicateRequestIds` (the service answers 409) and
the rest of its batch is committed.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import queue
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, InvalidStateError

from driftgate.serving.errors import describe_error
from driftgate.stores.samples import DuplicateRequestIds, Sample

log = logging.getLogger(__name__)


class WriterOverloaded(RuntimeError):
    """Too many requests are waiting for a commit; the caller should shed load."""


class WriterClosed(RuntimeError):
    """The writer is shutting down and accepts no more samples."""


class _Pending:
    """One request's samples and how its waiter learns the outcome: a
    ``concurrent.futures.Future`` (:meth:`GroupCommitWriter.submit`) or an ``asyncio``
    future of ``loop`` (:meth:`GroupCommitWriter.submit_async`)."""

    __slots__ = ("future", "loop", "samples")

    def __init__(self, samples: Sequence[Sample], future, loop=None) -> None:
        self.samples = samples
        self.future = future
        self.loop = loop

    def take(self) -> bool:
        """Claim the request for a commit; False if its waiter already gave up (its
        future is done: cancelled, or failed by the handler's timeout). Once taken, a
        request is committed whatever its waiter does next."""
        if self.loop is None:
            return self.future.set_running_or_notify_cancel()
        # Read from the writer thread: done() is one field read, atomic under the GIL.
        # A waiter giving up after this point finds its request committed, as before.
        return not self.future.done()


_STOP = object()


class GroupCommitWriter:
    """One thread that commits queued samples in batches.

    Args:
        append: Stores a batch durably, all or nothing (e.g. ``SqlSampleStore.append``);
            raises DuplicateRequestIds, storing nothing, for ids already stored.
        max_batch_samples: Most samples per transaction (a request is never split).
        max_wait_seconds: Once a batch has a request, how long to sleep while more come.
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
        self.max_pending_requests = max_pending_requests
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
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
        future: Future = Future()
        self._enqueue(_Pending(samples, future))
        return future

    def submit_async(self, samples: Sequence[Sample]) -> asyncio.Future:
        """As :meth:`submit`, for a caller on a running event loop: the returned future
        of that loop resolves once the samples are durable. Give up on it by cancelling
        it (or setting its exception): a request not yet taken is then not committed."""
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        self._enqueue(_Pending(samples, future, loop))
        return future

    def _enqueue(self, pending: _Pending) -> None:
        if self._closed.is_set() or not self._started:
            raise WriterClosed("the sample writer is not running")
        if self._queue.qsize() >= self.max_pending_requests:
            raise WriterOverloaded(
                f"{self.max_pending_requests} requests already wait for the sample store"
            )
        self._queue.put(pending)

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
        left = []
        while not self._queue.empty():
            item = self._queue.get_nowait()
            if item is not _STOP:
                left.append(item)
        _settle(left, exception=WriterClosed("the sample writer stopped"))

    def _next_batch(self) -> tuple[list[_Pending], bool]:
        first = self._queue.get()  # sleeps until a request comes
        if first is _STOP:
            return [], True
        if self.max_wait_seconds > 0:
            # Let the batch fill: one sleep, not one wake-up per request that arrives.
            # Also when requests are already queued: skipping the sleep then (tried for
            # issue 32) gave smaller batches, more fsyncs, and 10-20% fewer requests a
            # second on the quiet machine (onnxruntime, 16 connections).
            time.sleep(self.max_wait_seconds)
        batch: list[_Pending] = []
        size = 0
        item = first
        while True:
            if item is _STOP:
                return batch, True
            if item.take():
                batch.append(item)
                size += len(item.samples)
            if size >= self.max_batch_samples:
                return batch, False
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
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
                _settle(batch, exception=exc)

    def _commit(self, batch: list[_Pending]) -> None:
        if not batch:
            return
        samples = [sample for pending in batch for sample in pending.samples]
        started = time.perf_counter()
        try:
            written = self._append(samples)
        except DuplicateRequestIds as exc:
            duplicates = [p for p in batch if _is_duplicate(p, exc.request_ids)]
            for pending in duplicates:
                _settle([pending], exception=DuplicateRequestIds({pending.samples[0].request_id}))
            self._commit([p for p in batch if not _is_duplicate(p, exc.request_ids)])
            return
        except Exception as exc:
            # The detail goes to the server log only; its text may quote other requests.
            log.error("sample commit of %d samples failed: %s", len(samples), describe_error(exc))
            self._on_error(exc)
            _settle(batch, exception=exc)
            return
        # Rows written (samples and rejected records; an overflow count is no row).
        rows = written if isinstance(written, int) else len(samples)
        self._on_commit(len(batch), rows, time.perf_counter() - started)
        _settle(batch, result=len(samples))


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
            _settle([pending], exception=DuplicateRequestIds({request_id}))
            continue
        seen.add(request_id)
        kept.append(pending)
    return kept


def _is_accepted(pending: _Pending) -> bool:
    """Scored samples (unique request ids), not rejected records or overflow counts."""
    return bool(pending.samples) and isinstance(pending.samples[0], Sample)


def _is_duplicate(pending: _Pending, known: set[str]) -> bool:
    return _is_accepted(pending) and pending.samples[0].request_id in known


def _settle(batch: Sequence[_Pending], *, result=None, exception: BaseException | None = None):
    """Resolve the futures of ``batch``: each concurrent future at once, the asyncio
    futures with one call into each of their loops."""
    by_loop: dict = {}
    for pending in batch:
        if pending.loop is None:
            _resolve(pending.future, result=result, exception=exception)
        else:
            by_loop.setdefault(pending.loop, []).append(pending.future)
    for loop, futures in by_loop.items():
        # A closed loop (RuntimeError): nobody waits for these any more.
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(_resolve_all, futures, result, exception)


def _resolve_all(futures: list[asyncio.Future], result, exception) -> None:
    """On the futures' event loop: each one not given up on gets the outcome."""
    for future in futures:
        if not future.done():
            if exception is not None:
                future.set_exception(exception)
            else:
                future.set_result(result)


def _resolve(future: Future, *, result=None, exception: BaseException | None = None) -> None:
    try:
        if exception is not None:
            future.set_exception(exception)
        else:
            future.set_result(result)
    except InvalidStateError:  # already resolved or cancelled: nobody waits for it
        pass
