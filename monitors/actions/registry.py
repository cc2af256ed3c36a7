"""The registry of monitor actions, what an action is handed, and what it returns.

Idempotency: each action is idempotent on its own store (a review takes a window
once; a paused model is not paused again).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pandas as pd
from driftgate.monitors.rules import MonitorResult


class UnknownActionError(KeyError):
    def __str__(self) -> str:  # KeyError would print the repr of the message
        return str(self.args[0])


@dataclass
class ActionTaken:
    """What an action did on one window; ``changed`` is False when it changed nothing."""

    monitor: str
    action: str
    detail: str
    review_id: str | None = None
    changed: bool = True


@dataclass(frozen=True)
class ActionRequest:
    """A monitor that fired on one window, with its evidence (MLflow run, report)."""

    model_name: str
    model_version: str
    start: pd.Timestamp
    end: pd.Timestamp
    result: MonitorResult
    evidence: list[str] = field(default_factory=list)

    @property
    def what(self) -> str:
        """One line for people: the rule, the observed value, the features, the window."""
        result = self.result
        observed = "-" if result.observed is None else f"{result.observed:.4g}"
        return (
            f"{result.monitor}: {result.metric} {observed} > {result.threshold:g} on "
            f"{', '.join(result.breached_features) or 'the window'} "
            f"({self.start.isoformat()}..{self.end.isoformat()})"
        )


@dataclass
class ActionPorts:
    """The stores an action may change, opened by the caller.

    ``reviews``: ``open_or_update(...) -> ReviewChange`` (driftgate.stores.reviews);
    ``pause``: ``(model_name, **why) -> SwitchChange`` (the control store's pause switch);
    ``tag_model_version``: ``(model_name, version, tags)`` on the model registry.
    """

    reviews: Any
    pause: Callable[..., Any]
    tag_model_version: Callable[[str, str, dict[str, str]], None]
    actor: str = "drift-check"


@dataclass(frozen=True)
class Action:
    """A registered action: its function, and its idempotency contract in words."""

    name: str
    run: Callable[[ActionRequest, ActionPorts], ActionTaken]
    description: str
    idempotency: str


ACTIONS: dict[str, Action] = {}


def register_action(action: Action) -> Action:
    """Add an action to the registry (one line at the bottom of each action module)."""
    if action.name in ACTIONS:
        raise ValueError(f"monitor action {action.name!r} is already registered")
    if not action.idempotency.strip():
        raise ValueError(f"monitor action {action.name!r} must state its idempotency contract")
    ACTIONS[action.name] = action
    return action


def action_names() -> list[str]:
    return sorted(ACTIONS)


def get_action(name: str) -> Action:
    try:
        return ACTIONS[name]
    except KeyError:
        raise UnknownActionError(
            f"unknown monitor action {name!r}; known actions: {', '.join(action_names())}"
        ) from None


def take_action(name: str, request: ActionRequest, ports: ActionPorts) -> ActionTaken:
    """Run action ``name`` for ``request``."""
    return get_action(name).run(request, ports)
