"""``retrain``: open a review and start train -> validate-and-promote for the model.

Opens (or updates) a review first, as ``open_review`` does: the review is where a
person sees the breach, the retrain it started and, when the retrain ends, its outcome
(candidate version, gate report, promoted or not). Then asks the retrain port
(``ports.retrain``, :func:`driftgate.jobs.retrain.start_retrain`) to start a retrain:
a run of the ``train/<model>`` Prefect deployment where one is registered, else the
train and promotion jobs in process. The gate decides whether the candidate replaces
the champion; this action never touches aliases.

Idempotency: the ledger of :func:`take_action` makes a re-run of an acted-on window
change nothing; beneath it the retrain store takes each breach (model, monitor, window)
once, ever, and holds at most one retrain in flight per model, so a second breach while
one runs, or two drift checks racing on one window, start nothing more.
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


class RetrainUnavailableError(RuntimeError):
    """The caller handed no retrain port (nothing here can train)."""


def retrain(request: ActionRequest, ports: ActionPorts) -> ActionTaken:
    if ports.retrain is None:
        raise RetrainUnavailableError(
            f"{request.result.monitor}: action retrain needs a retrain port; this caller "
            "cannot start training"
        )
    review = open_review(request, ports)
    start = ports.retrain(request, review.review_id)
    return ActionTaken(
        request.result.monitor,
        "retrain",
        f"{start.detail} (review {review.review_id}): {request.what}",
        review.review_id,
        review.changed or start.started,
    )


register_action(
    Action(
        name="retrain",
        run=retrain,
        description="open a review and start train -> gate (one retrain in flight per model)",
        idempotency="one retrain per breach window, at most one in flight per model",
    )
)
