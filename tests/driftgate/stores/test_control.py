"""The durable pause switch and its audit log on SQLite and real PostgreSQL."""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime

import pytest

from driftgate.stores import ControlStore

WINDOW = (datetime(2026, 3, 1, 12, tzinfo=UTC), datetime(2026, 3, 1, 13, tzinfo=UTC))


def test_a_model_never_paused_is_running(store_url):
    state = ControlStore(store_url).state("m")
    assert not state.paused and state.reason is None


def test_pause_records_the_cause_and_survives_a_reopen(store_url):
    change = ControlStore(store_url).pause(
        "m",
        reason="visibility missing in 40% of rows",
        actor="monitor:missing-data",
        monitor="missing-data",
        window_start=WINDOW[0],
        window_end=WINDOW[1],
        evidence=["runs:/abc", "reports/w1.html"],
        review_id="rv-1",
    )
    assert change.changed and change.event.action == "pause"
    reopened = ControlStore(store_url).state("m")  # a new process would see the same
    assert reopened.paused
    assert (reopened.monitor, reopened.review_id) == ("missing-data", "rv-1")
    assert (reopened.window_start, reopened.window_end) == WINDOW
    assert reopened.evidence == ("runs:/abc", "reports/w1.html")
    assert reopened.since == change.event.at
    assert ControlStore(store_url).state("other-model").paused is False


def test_repeated_pauses_keep_the_first_cause(store_url):
    store = ControlStore(store_url)
    first = store.pause("m", reason="drift", actor="monitor:a", monitor="a",
                        window_start=WINDOW[0], window_end=WINDOW[1])  # fmt: skip
    same = store.pause("m", reason="drift", actor="monitor:a", monitor="a",
                       window_start=WINDOW[0], window_end=WINDOW[1])  # fmt: skip
    assert not same.changed and same.event is None  # re-running a window is idempotent
    other = store.pause("m", reason="missing data", actor="monitor:b", monitor="b")
    assert not other.changed and other.event is not None and other.event.changed is False
    state = store.state("m")
    assert state.reason == "drift" and state.since == first.event.at
    assert [(e.action, e.changed, e.actor) for e in store.events("m")] == [
        ("pause", False, "monitor:b"),
        ("pause", True, "monitor:a"),
    ]


def test_resume_clears_the_switch_and_logs_the_pause_it_ends(store_url):
    store = ControlStore(store_url)
    store.pause("m", reason="drift", actor="monitor:a", monitor="a", review_id="rv-9")
    change = store.resume("m", reason="reviewed: seasonal", actor="cli:alice")
    assert change.changed and not change.state.paused
    assert (change.event.monitor, change.event.review_id) == ("a", "rv-9")
    assert not ControlStore(store_url).state("m").paused
    idle = store.resume("m", reason="again", actor="cli:alice")
    assert not idle.changed and idle.event is None
    assert [e.action for e in store.events("m")] == ["resume", "pause"]
    assert [e.to_dict()["action"] for e in store.events(limit=1)] == ["resume"]


def test_reasons_are_required(store_url):
    store = ControlStore(store_url)
    with pytest.raises(ValueError, match="reason"):
        store.pause("m", reason=" ", actor="x")
    with pytest.raises(ValueError, match="reason"):
        store.resume("m", reason="", actor="x")


def test_concurrent_pauses_flip_the_switch_once(store_url):
    """Writers in parallel: one pause wins, the others are logged as not changing it."""
    stores = [ControlStore(store_url) for _ in range(6)]
    barrier = threading.Barrier(len(stores))
    changes, errors = [], []

    def pause(i: int) -> None:
        try:
            barrier.wait()
            changes.append(stores[i].pause("m", reason=f"cause {i}", actor=f"w{i}", monitor=f"{i}"))
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=pause, args=(i,)) for i in range(len(stores))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    assert sum(c.changed for c in changes) == 1
    events = stores[0].events("m")
    assert len(events) == 6 and sum(e.changed for e in events) == 1
    winner = next(c for c in changes if c.changed)
    assert stores[0].state("m").reason == winner.state.reason


def test_exclusive_admits_one_holder_at_a_time(store_url):
    first, second = ControlStore(store_url), ControlStore(store_url)
    order: list[str] = []
    inside = threading.Event()

    def hold() -> None:
        with first.exclusive("champion:m"):
            order.append("first in")
            inside.set()
            time.sleep(0.5)
            order.append("first out")

    thread = threading.Thread(target=hold)
    thread.start()
    assert inside.wait(10)
    with second.exclusive("champion:m"):
        order.append("second in")
    thread.join()
    assert order == ["first in", "first out", "second in"]
    first.close()
    second.close()


def test_exclusive_times_out_naming_the_lock(store_url):
    from driftgate.stores._sql import StoreError

    first, second = ControlStore(store_url), ControlStore(store_url)
    with first.exclusive("champion:m"):
        started = time.monotonic()
        held = r"lock 'champion:m' .* is held by another process"
        with pytest.raises(StoreError, match=held), second.exclusive("champion:m", timeout_s=0.5):
            pass
        assert time.monotonic() - started < 5
    with second.exclusive("champion:m", timeout_s=0.5):  # released: free again
        pass
    first.close()
    second.close()


HOLDER = """
import sys, time
from driftgate.stores import ControlStore
with ControlStore(sys.argv[1]).exclusive("champion:m"):
    print("held", flush=True)
    time.sleep(600)
"""


def test_a_holder_killed_mid_lock_leaves_no_lock_behind(store_url):
    import signal
    import subprocess
    import sys

    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, store_url], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        store = ControlStore(store_url)
        from driftgate.stores._sql import StoreError

        with pytest.raises(StoreError), store.exclusive("champion:m", timeout_s=0.3):
            pass
        holder.send_signal(signal.SIGKILL)
        holder.wait(10)
        with store.exclusive("champion:m", timeout_s=10):
            pass
        store.close()
    finally:
        if holder.poll() is None:
            holder.kill()


FLIPPER = """
import sys
from driftgate.stores import ControlStore
store = ControlStore(sys.argv[1])
i = 0
while True:
    i += 1
    store.pause("m", reason=f"flip {i}", actor="crash-test")
    store.resume("m", reason=f"flop {i}", actor="crash-test")
    if i == 3:
        print("flipping", flush=True)
"""


def test_a_writer_killed_mid_flip_leaves_a_readable_switch_that_agrees_with_its_log(
    store_url,
):
    """SIGKILL lands in the middle of pause/resume transactions: afterwards the switch
    reads, its position is the one the last changing event says, and the store still
    takes writes (no half-written row, no stuck lock)."""
    import signal
    import subprocess
    import sys

    for delay in (0.05, 0.2, 0.5):
        writer = subprocess.Popen(
            [sys.executable, "-c", FLIPPER, store_url], stdout=subprocess.PIPE, text=True
        )
        try:
            assert writer.stdout.readline().strip() == "flipping"
            time.sleep(delay)
            writer.send_signal(signal.SIGKILL)
            writer.wait(10)
        finally:
            if writer.poll() is None:
                writer.kill()
        store = ControlStore(store_url)
        state = store.state("m")
        last_change = next(e for e in store.events("m", limit=50) if e.changed)
        assert state.paused == (last_change.action == "pause")
        if state.paused:
            assert state.reason == last_change.reason
        store.resume("m", reason="after the crash", actor="test")
        assert store.state("m").paused is False
        store.close()
