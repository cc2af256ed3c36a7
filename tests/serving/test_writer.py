"""The group-commit writer on its own, on a real SQLite sample store: what each waiter
learns, batching, the lock-free hand-off and giving up before a request is taken."""

from __future__ import annotations

import asyncio
import threading
import time
from datetime import UTC, datetime

import pytest

from driftgate.serving.writer import GroupCommitWriter, WriterClosed, WriterOverloaded
from driftgate.stores.samples import DuplicateRequestIds, Sample, SqlSampleStore


def sample(request_id: str, index: int = 0) -> Sample:
    now = datetime.now(UTC)
    return Sample(
        timestamp=now, received_at=now, request_id=request_id, record_index=index,
        model_name="m", model_version="1", features={"x": float(index)},
        prediction=0.5, predicted_class=1,
    )  # fmt: skip


@pytest.fixture
def store(tmp_path):
    store = SqlSampleStore(f"sqlite:///{tmp_path / 'samples.db'}")
    yield store
    store.close()


def writer_of(store, **options) -> GroupCommitWriter:
    commits: list[tuple[int, int]] = []
    writer = GroupCommitWriter(
        lambda batch: store.append(batch, refuse_known_request_ids=True),
        on_commit=lambda requests, samples, seconds: commits.append((requests, samples)),
        **options,
    )
    writer.commits = commits
    return writer


def gated(writer: GroupCommitWriter) -> threading.Event:
    """Hold each of ``writer``'s commits until the returned event is set."""
    gate = threading.Event()
    append = writer._append
    writer._append = lambda batch: (gate.wait(10), append(batch))[1]
    return gate


def test_async_waiters_learn_their_commit_and_share_batches(store):
    writer = writer_of(store, max_wait_seconds=0.02)
    writer.start()

    async def send_all() -> list:
        futures = [writer.submit_async([sample(f"r{i}"), sample(f"r{i}", 1)]) for i in range(40)]
        futures.append(writer.submit_async([sample("r3")]))  # an id taken in this batch
        return await asyncio.gather(*futures, return_exceptions=True)

    outcomes = asyncio.run(send_all())
    writer.close()
    assert all(isinstance(o, int) for o in outcomes[:40]), outcomes
    assert isinstance(outcomes[40], DuplicateRequestIds)
    assert store.count() == 80  # every acknowledged sample is stored, the duplicate not
    # The requests waited together: far fewer commits than requests.
    assert sum(r for r, _ in writer.commits) == 40 and len(writer.commits) < 10


def test_a_waiter_that_gave_up_before_its_batch_was_taken_is_not_committed(store):
    writer = writer_of(store, max_wait_seconds=0.0)
    gate = gated(writer)
    writer.start()

    async def scenario():
        first = writer.submit_async([sample("first")])  # taken, its commit held at the gate
        await asyncio.sleep(0.2)
        given_up = writer.submit_async([sample("given-up")])
        given_up.cancel()  # the handler stopped waiting before the writer took it
        kept = writer.submit_async([sample("kept")])
        gate.set()
        return await first, await kept

    assert asyncio.run(scenario()) == (1, 1)
    writer.close()
    assert sorted(store.request_ids()) == ["first", "kept"]


def test_submit_refuses_when_closed_or_full(store):
    writer = writer_of(store, max_pending_requests=2)
    with pytest.raises(WriterClosed):
        writer.submit([sample("early")])  # not started
    gate = gated(writer)
    writer.start()
    held = writer.submit([sample("held")])
    while writer.pending():  # the writer took it and waits at the gate
        time.sleep(0.01)
    queued = [writer.submit([sample(f"q{i}")]) for i in range(2)]
    with pytest.raises(WriterOverloaded):
        writer.submit([sample("over")])
    gate.set()
    assert held.result(10) == 1 and [f.result(10) for f in queued] == [2, 2]
    writer.close()
    with pytest.raises(WriterClosed):
        writer.submit([sample("late")])
    assert store.count() == 3
