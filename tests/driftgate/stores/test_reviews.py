"""Reviews on SQLite and on the real PostgreSQL server."""

import pytest

from driftgate.stores._sql import StoreError
from driftgate.stores.reviews import ReviewStore

W1 = ("2026-01-01T00:00:00Z", "2026-01-01T01:00:00Z")
W2 = ("2026-01-01T01:00:00Z", "2026-01-01T02:00:00Z")
W3 = ("2026-01-01T02:00:00Z", "2026-01-01T03:00:00Z")


@pytest.fixture
def store(store_url):
    opened = ReviewStore(store_url)
    yield opened
    opened.close()


def breach(store, window, version="3", monitor="mean-shift-kl", observed=0.2, features=("a",)):
    return store.open_or_update(
        model_name="m",
        model_version=version,
        monitor=monitor,
        metric="kl",
        window_start=window[0],
        window_end=window[1],
        observed=observed,
        threshold=0.1,
        features=features,
        evidence=[f"run:{window[0]}"],
    )


def test_one_open_review_per_version_and_monitor_updated_on_repeated_breaches(store):
    first = breach(store, W1)
    assert first.created and first.review.breaches == 1 and first.review.status == "open"
    again = breach(store, W2, observed=0.3, features=("b",))
    assert (again.created, again.updated) == (False, True)
    assert again.review.id == first.review.id
    assert again.review.breaches == 2 and again.review.observed == 0.3
    assert again.review.features == ["a", "b"]
    assert len(again.review.evidence) == 2
    other_monitor = breach(store, W2, monitor="missing-values")
    other_version = breach(store, W2, version="4")
    assert other_monitor.created and other_version.created
    assert len(store.list(status="open")) == 3


def test_the_same_window_twice_changes_nothing(store):
    breach(store, W1)
    repeat = breach(store, W1)
    assert (repeat.created, repeat.updated) == (False, False)
    assert repeat.review.breaches == 1


def test_resolve_closes_and_the_next_breach_opens_a_new_review(store):
    opened = breach(store, W1).review
    resolved = store.resolve(opened.id, by="alice", resolution="seasonal; retrain")
    assert resolved.status == "resolved" and resolved.resolved_by == "alice"
    assert store.get(opened.id).resolution == "seasonal; retrain"
    with pytest.raises(StoreError, match="already resolved"):
        store.resolve(opened.id, by="bob", resolution="again")
    with pytest.raises(StoreError, match="no review with id 'rv-nope'"):
        store.resolve("rv-nope", by="bob", resolution="x")
    reopened = breach(store, W2)
    assert reopened.created and reopened.review.id != opened.id


def test_reviews_survive_reopening_the_store(store_url):
    first = ReviewStore(store_url)
    review = breach(first, W1).review
    first.close()
    second = ReviewStore(store_url)
    assert second.get(review.id).breaches == 1
    second.close()
