"""``notify``: tell people, change nothing else.

The message goes to the monitoring webhook (``monitoring.webhook_url`` or
``DRIFTGATE_WEBHOOK_URL``), which the drift check posts for every action that changed
something; without a webhook the breach is in the drift check's summary and logs.

Idempotency: the ledger of :func:`take_action` records the window, so a re-run reports
it unchanged and the webhook is not posted twice for the same monitor and window.
"""

from __future__ import annotations

from driftgate.monitors.actions.registry import (
    Action,
    ActionPorts,
    ActionRequest,
    ActionTaken,
    register_action,
)


def notify(request: ActionRequest, ports: ActionPorts) -> ActionTaken:
    return ActionTaken(request.result.monitor, "notify", request.what)


register_action(
    Action(
        name="notify",
        run=notify,
        description="post the breach to the webhook; no store changes",
        idempotency="one notification per window",
    )
)
