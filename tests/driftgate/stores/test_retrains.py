"""The retrain store on SQLite and on the real PostgreSQL server: one retrain per
breach, at most one in flight per model (durably, across store objects and racing
processes), and a lease after which a dead retrain frees the slot."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

import pytest

from driftgate.stores.retrains import DONE, EXPIRED, FAILED, IN_FLIGHT, RetrainStore

W1 = ("2026-01-01T00:00:00Z", "2026-01-01T01:00:00Z")
W2 = ("2026-01-01T01:00:00Z", "2026-01-01T02:00:00Z")
W3 = ("2026-01-01T02:00:00Z", "2026-01-01T03:00:00Z")
HOUR = timedelta(hours=1)


@pytest.fixture
def store(store_url):
    opened = RetrainStore(store_url)
    yield opened
    opened.close()


def claim(store, window=W1, monitor="kl", model="m", lease=HOUR, cooldown=None):
    return store.claim(
        model_name=model,
        champion_version="3",
        monitor=monitor,
        window_start=window[0],
        window_end=window[1],
        review_id="rv-1",
        lease=lease,
        cooldown=cooldown,
    )


def finish(store, retrain_id, promoted=True):
    return store.finish(
        retrain_id, run_id="r1", candidate_version="4", passed=promoted, promoted=promoted,
        gate_report="runs:/r1/gates/gate.md",
    )  # fmt: skip


def test_the_same_breach_claimed_twice_starts_one_retrain(store):
    first, again = claim(store), claim(store)
    assert first.started and not again.started
    assert again.retrain.id == first.retrain.id and again.retrain.status == IN_FLIGHT
    finish(store, first.retrain.id)
    # Finished: the same breach still asks for nothing more.
    late = claim(store)
    assert not late.started and late.retrain.status == DONE
    assert [r.id for r in store.list("m")] == [first.retrain.id]


def test_a_cooldown_keeps_a_persisting_breach_from_retraining_every_window(store):
    two_hours = 2 * HOUR
    first = claim(store, W1, cooldown=two_hours)
    finish(store, first.retrain.id, promoted=False)
    # The drift persists: the next window ends an hour after the retrained one.
    second = claim(store, W2, cooldown=two_hours)
    assert not second.started and second.retrain.id == first.retrain.id
    assert claim(store, W2, model="another-model", cooldown=two_hours).started  # per model
    # W3 ends two hours after W1: the cooldown has passed, whatever the clock says.
    later = claim(store, W3, cooldown=two_hours)
    assert later.started and later.retrain.id != first.retrain.id


def month(index: int) -> tuple[str, str]:
    """The ``index``-th 30-day window of 2031 (0: 2031-01-01 .. 2031-01-31)."""
    start = datetime(2031, 1, 1, tzinfo=UTC) + index * timedelta(days=30)
    return start.isoformat(), (start + timedelta(days=30)).isoformat()


def test_the_cooldown_is_event_time_so_a_replayed_year_retrains_after_it(store):
    """Issue 29: replaying a year of windows in an hour, a 30-day cooldown counted on
    the clock blocked every retrain after the first, although later months breached.
    Counted from the retrained window's end to the breaching window's end, a breach
    retrains once the cooldown of the windows' time has passed: with 60 days, every
    other month."""
    cooldown = timedelta(days=60)
    started = []
    for index in range(12):  # judged back to back: microseconds apart on the clock
        taken = claim(store, month(index), cooldown=cooldown)
        if taken.started:
            started.append(index)
            finish(store, taken.retrain.id, promoted=False)
        else:
            assert taken.retrain.status == DONE and taken.retrain.window == month(started[-1])
    assert started == [0, 2, 4, 6, 8, 10]


def test_a_window_judged_late_is_within_the_cooldown_of_a_later_retrain(store):
    """A catch-up judging an older window after a newer one retrained: the model already
    learnt from later data, so the older breach starts nothing."""
    finish(store, claim(store, month(6), cooldown=timedelta(days=30)).retrain.id)
    late = claim(store, month(1), cooldown=timedelta(days=30))
    assert not late.started and late.retrain.window == month(6)


def test_a_second_breach_while_one_is_in_flight_starts_nothing_until_it_ends(store_url, store):
    first = claim(store, W1)
    # Another monitor, another window, another store object (another process).
    other = RetrainStore(store_url)
    try:
        second = claim(other, W2, monitor="missing")
        assert not second.started and second.retrain.id == first.retrain.id
        assert claim(other, W2, model="another-model").started  # per model
    finally:
        other.close()
    finish(store, first.retrain.id, promoted=False)
    third = claim(store, W3)
    assert third.started and third.retrain.status == IN_FLIGHT
    assert store.get(first.retrain.id).outcome.endswith("not promoted (gate failed)")


def test_a_failed_or_expired_retrain_leaves_no_cooldown(store):
    """Issue 29: a retrain that crashed (a contract breach on production rows) started
    the cooldown, so no later breaching window retrained."""
    cooldown = 2 * HOUR
    crashed = claim(store, W1, cooldown=cooldown)
    store.fail(crashed.retrain.id, "ContractBreach: columns.id.dtype")
    second = claim(store, W2, cooldown=cooldown, lease=timedelta(microseconds=1))
    assert second.started and second.retrain.id != crashed.retrain.id
    # Its process died: the lease (wall-clock) expired, and it holds no cooldown either.
    third = claim(store, W3, cooldown=cooldown)
    assert third.started and store.get(second.retrain.id).status == EXPIRED
    finish(store, third.retrain.id, promoted=False)  # an outcome: this one holds it
    assert not claim(
        store, ("2026-01-01T03:00:00Z", "2026-01-01T04:00:00Z"), cooldown=cooldown
    ).started


def test_a_failed_retrain_frees_the_slot(store):
    first = claim(store, W1)
    failed = store.fail(first.retrain.id, "RuntimeError: out of memory")
    assert failed.status == FAILED and "out of memory" in failed.outcome
    assert claim(store, W2).started


def test_a_stale_in_flight_retrain_expires_and_the_next_breach_takes_the_slot(store):
    dead = claim(store, W1, lease=timedelta(microseconds=1))
    store.launched(dead.retrain.id, launcher="prefect", flow_run_id="fr-1")
    taken = claim(store, W2)
    assert taken.started
    expired = store.get(dead.retrain.id)
    assert expired.status == EXPIRED and "fr-1" in expired.detail
    # The expired breach itself is not asked again.
    assert not claim(store, W1).started


def test_racing_claims_for_one_model_start_exactly_one(store_url, store):
    stores = [RetrainStore(store_url) for _ in range(6)]
    results, barrier = [], threading.Barrier(len(stores))

    def race(index, opened):
        barrier.wait()
        results.append(claim(opened, (f"2026-02-0{index + 1}T00:00:00Z", "2026-03-01T00:00:00Z")))

    threads = [threading.Thread(target=race, args=(i, s)) for i, s in enumerate(stores)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for opened in stores:
        opened.close()
    started = [r for r in results if r.started]
    assert len(results) == 6 and len(started) == 1
    assert {r.retrain.id for r in results} == {started[0].retrain.id}
    assert len(store.list("m")) == 1
