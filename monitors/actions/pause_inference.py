"""``pause_inference``: stop serving the model until a person resumes it.

Opens (or updates) a review first, as ``open_review`` does: a paused model needs a
person, and the service's 503 body names the review to look at. Then sets the pause
switch, with the reason, the monitor, the window, the evidence and the review.

Idempotency: an already paused model is not paused again (no second audit event); the
ledger of :func:`take_action` makes a re-run of an acted-on window change nothing, so
inference that a person resumed stays resumed.
"""

from __future__ import annotations

from driftgate.monitors.actions.open_review import open_review
from driftgate.monitors.actions.registry import (
    Action,
    ActionPorts,
    ActionRequest,
    ActionTaken,
    register_action,
)


def pause_inference(request: ActionRequest, ports: ActionPorts) -> ActionTaken:
    review = open_review(request, ports)
    switch = ports.pause(
        request.model_name,
        reason=request.what,
        actor=ports.actor,
        monitor=request.result.monitor,
        window_start=request.start,
        window_end=request.end,
        evidence=request.evidence,
        review_id=review.review_id,
    )
    state = "paused" if switch.changed else "already paused"
    return ActionTaken(
        request.result.monitor,
        "pause_inference",
        f"inference {state} (review {review.review_id}): {request.what}",
        review.review_id,
        switch.changed,
    )


register_action(
    Action(
        name="pause_inference",
        run=pause_inference,
        description="open a review and pause inference until a person resumes it",
        idempotency="pauses once per window; a resumed model is not paused again by a re-run",
    )
)
