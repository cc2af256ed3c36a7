"""The registry of monitor actions, what an action is handed, and what it returns.

Idempotency, in two layers:

1. each action is idempotent on its own store where the store can tell (a review takes
   a window once; a paused model is not paused again);
2. :func:`take_action` keeps a ledger of the windows each monitor has acted on
   (``ports.ledger``): the same monitor and window acted on again returns what was done
   then, marked unchanged, and changes nothing, even when a person resolved the review
   or resumed inference in between (a re-run must not undo their decision).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import pandas as pd

from driftgate.monitors.results import MonitorResult, breach_comparison


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
        if "drop" in result.details:  # an estimated metric: its threshold is on the drop
            return (
                f"{result.monitor}: {result.metric} {observed}, a "
                f"{'drop' if result.details.get('higher_is_better', True) else 'rise'} of "
                f"{result.details['drop']:.4g} >= {result.threshold:g} from the reference "
                f"{result.details['reference_estimate']:.4g} "
                f"({self.start.isoformat()}..{self.end.isoformat()})"
            )
        comparison = breach_comparison(
            result.observed, result.threshold, result.details.get("observed") == "p_value"
        )
        return (
            f"{result.monitor}: {result.metric} {comparison} on "
            f"{', '.join(result.breached_features) or 'the window'} "
            f"({self.start.isoformat()}..{self.end.isoformat()})"
            f"{effects_text(result.details.get('effects'))}"
        )


def effects_text(effects: dict | None) -> str:
    """``; island: Cramér's V 0.31, Biscoe 0.49 -> 0.21, Dream 0.36 -> 0.61`` for each
    feature of a drift result's ``details["effects"]`` (:mod:`monitors.kinds.drift`):
    its effect size when the value shown is not it (a p-value), and the categorical
    levels whose share moved most; empty when there is nothing to add."""
    parts = []
    for feature, effect in (effects or {}).items():
        said = [f"{effect['effect']} {effect['effect_size']:.2g}"] if effect.get("effect") else []
        said += [
            f"{m['level']} {m['reference']:.2f} -> {m['current']:.2f}"
            for m in effect.get("moved") or []
        ]
        if said:
            parts.append(f"{feature}: {', '.join(said)}")
    return "".join(f"; {part}" for part in parts)


class Ledger(Protocol):
    def action_taken(
        self, model_name: str, model_version: str, monitor: str, window_start, window_end
    ) -> ActionTaken | None: ...

    def record_action(
        self, model_name: str, model_version: str, window_start, window_end, taken: ActionTaken
    ) -> None: ...


@dataclass(frozen=True)
class RetrainStart:
    """What the retrain port did: ``started`` a new retrain, or found one (in flight for
    the model, or already asked for by this breach); ``detail`` says which, for people;
    ``links`` point at it (retrain id, Prefect flow run, MLflow run, gate report)."""

    started: bool
    detail: str
    links: list[str] = field(default_factory=list)


@dataclass
class ActionPorts:
    """The stores an action may change, opened by the caller.

    ``reviews``: ``open_or_update(...) -> ReviewChange`` (driftgate.stores.reviews);
    ``pause``: ``(model_name, **why) -> SwitchChange`` (the control store's pause switch);
    ``tag_model_version``: ``(model_name, version, tags)`` on the model registry;
    ``ledger``: the windows already acted on (driftgate.stores.monitor_state);
    ``retrain``: ``(request, review_id) -> RetrainStart``, starts train -> gate for the
    model unless one is in flight (driftgate.jobs.retrain); None where nothing can train.
    """

    reviews: Any
    pause: Callable[..., Any]
    tag_model_version: Callable[[str, str, dict[str, str]], None]
    ledger: Ledger
    actor: str = "drift-check"
    retrain: Callable[[ActionRequest, str | None], RetrainStart] | None = None


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
    """Run action ``name`` for ``request`` once per monitor and window (see the module)."""
    action = get_action(name)
    key = (request.model_name, request.model_version)
    previous = ports.ledger.action_taken(*key, request.result.monitor, request.start, request.end)
    if previous is not None:
        return ActionTaken(
            previous.monitor,
            previous.action,
            f"already taken for this window: {previous.detail}",
            previous.review_id,
            changed=False,
        )
    taken = action.run(request, ports)
    ports.ledger.record_action(*key, request.start, request.end, taken)
    return taken
