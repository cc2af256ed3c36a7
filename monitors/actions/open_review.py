"""``open_review``: ask a person to look at the breach.

Opens a review for the monitor on this model version, or updates the open one (breach
count, latest window, observed value, features, evidence), and tags the model version
with the review's id and breach count so the MLflow UI shows it.

Idempotency: the review store takes a window once (the same window again leaves the
review as it is, and the tag is not rewritten); the ledger of :func:`take_action` makes
a re-run of an acted-on window change nothing even after the review was resolved.
"""

from __future__ import annotations

from driftgate.monitors.actions.registry import (
    Action,
    ActionPorts,
    ActionRequest,
    ActionTaken,
    register_action,
)


def open_review(request: ActionRequest, ports: ActionPorts) -> ActionTaken:
    result = request.result
    change = ports.reviews.open_or_update(
        model_name=request.model_name,
        model_version=request.model_version,
        monitor=result.monitor,
        metric=result.metric,
        window_start=request.start,
        window_end=request.end,
        observed=result.observed,
        threshold=result.threshold,
        features=result.breached_features,
        evidence=request.evidence,
    )
    review = change.review
    changed = change.created or change.updated
    if changed:
        ports.tag_model_version(
            request.model_name,
            request.model_version,
            {f"driftgate.review.{result.monitor}": f"{review.id} open, {review.breaches} breaches"},
        )
    state = "opened" if change.created else "updated" if change.updated else "unchanged"
    return ActionTaken(
        result.monitor,
        "open_review",
        f"review {review.id} {state}: {request.what}",
        review.id,
        changed,
    )


register_action(
    Action(
        name="open_review",
        run=open_review,
        description="open (or update) a review of the breach and tag the model version",
        idempotency="one review update per window; a window already taken changes nothing",
    )
)
