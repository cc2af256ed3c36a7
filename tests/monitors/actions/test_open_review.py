"""``open_review``: one review per breach, and its idempotency contract."""

from driftgate.monitors.actions import take_action

from .conftest import W2, request


def test_a_breach_opens_a_review_and_tags_the_model_version(stores):
    taken = take_action("open_review", request(action="open_review"), stores.ports)
    (review,) = stores.reviews.list(status="open")
    assert taken.changed and taken.review_id == review.id and "opened" in taken.detail
    assert review.features == ["dew_point"] and review.evidence == ["runs:/abc"]
    assert stores.tags == [
        ("m", "3", {"driftgate.review.missing-values": f"{review.id} open, 1 breaches"})
    ]
    later = take_action("open_review", request(W2, action="open_review"), stores.ports)
    assert later.changed and later.review_id == review.id
    assert stores.reviews.get(review.id).breaches == 2


def test_the_same_window_twice_changes_nothing_even_after_the_review_was_resolved(stores):
    first = take_action("open_review", request(action="open_review"), stores.ports)
    stores.reviews.resolve(first.review_id, by="alice", resolution="sensor fixed")
    again = take_action("open_review", request(action="open_review"), stores.ports)
    assert again.changed is False and again.review_id == first.review_id
    assert stores.reviews.list(status="open") == []  # no review reopened for a judged window
    assert len(stores.tags) == 1
