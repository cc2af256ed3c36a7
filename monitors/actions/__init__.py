"""Monitor actions, one module per action, registered by name when this package loads.

An action is what a monitor does when it fires on a window (``action:`` in
``gates.yaml``). Each module defines a function ``(request, ports) -> ActionTaken`` and
registers it at the bottom with :func:`register_action`, stating its idempotency
contract: *the same monitor and window acted on twice changes nothing the second time*.

Every module of this package is imported here (discovered, not listed), so adding an
action is one new module plus its test; ``gates.yaml`` is refused at load when it names
an action that is not registered, listing the known ones.

Actions are plain functions over the ports they are handed (the review store, the pause
switch, the model registry's tags: :class:`ActionPorts`), so this package imports
nothing above the domain and the gate config can be checked against it when it loads.
The drift check's ``act`` step (``driftgate.jobs.drift_check``) opens the real stores,
runs :func:`take_action` and posts the webhook.
"""

import importlib
import pkgutil

from driftgate.monitors.actions.registry import (
    ACTIONS,
    Action,
    ActionPorts,
    ActionRequest,
    ActionTaken,
    RetrainStart,
    UnknownActionError,
    action_names,
    get_action,
    register_action,
    take_action,
)

for _module in pkgutil.iter_modules(__path__):
    if _module.name != "registry":
        importlib.import_module(f"{__name__}.{_module.name}")

__all__ = [
    "ACTIONS",
    "Action",
    "ActionPorts",
    "ActionRequest",
    "ActionTaken",
    "RetrainStart",
    "UnknownActionError",
    "action_names",
    "get_action",
    "register_action",
    "take_action",
]
