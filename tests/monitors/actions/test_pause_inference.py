"""``pause_inference``: a review, then the pause switch, and its idempotency contract."""

from driftgate.monitors.actions import take_action

from .conftest import W2, request


def test_a_breach_pauses_with_the_review_the_window_and_the_evidence(stores):
    taken = take_action("pause_inference", request(), stores.ports)
    state = stores.control.state("m")
    assert taken.changed and state.paused and state.review_id == taken.review_id
    assert state.monitor == "missing-values" and "dew_point" in state.reason
    assert "runs:/abc" in state.evidence
    assert [r.id for r in stores.reviews.list(status="open")] == [taken.review_id]


def test_a_rerun_after_a_resume_does_not_pause_again(stores):
    """Issue 18: re-running an already judged window after a resume paused again."""
    take_action("pause_inference", request(), stores.ports)
    stores.control.resume("m", reason="sensor fixed", actor="alice")
    again = take_action("pause_inference", request(), stores.ports)
    assert again.changed is False and not stores.control.state("m").paused
    assert [e.action for e in stores.control.events("m")].count("pause") == 1
    assert stores.reviews.list(status="open")[0].breaches == 1


def test_the_next_window_pauses_again_after_a_resume(stores):
    take_action("pause_inference", request(), stores.ports)
    stores.control.resume("m", reason="sensor fixed", actor="alice")
    assert take_action("pause_inference", request(W2), stores.ports).changed
    assert stores.control.state("m").paused
