"""``notify``: no store changes, once per window (the webhook is posted on changes)."""

from driftgate.monitors.actions import take_action

from .conftest import W2, request


def test_notify_changes_no_store_and_is_taken_once_per_window(stores):
    first = take_action("notify", request(action="notify"), stores.ports)
    assert first.changed and first.action == "notify" and "dew_point" in first.detail
    assert stores.reviews.list() == [] and not stores.control.state("m").paused
    again = take_action("notify", request(action="notify"), stores.ports)
    assert again.changed is False  # so the webhook is not posted twice
    assert take_action("notify", request(W2, action="notify"), stores.ports).changed
