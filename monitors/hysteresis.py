"""Whether a breaching window fires: consecutive breaches counted against a monitor's
``consecutive_breaches`` (hysteresis). A window without data neither counts nor resets."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from driftgate.monitors.results import MonitorResult


class _CountsBreaches(Protocol):
    consecutive_breaches: int


@dataclass(frozen=True)
class Firing:
    """Hysteresis: ``consecutive`` breaching windows so far; ``fire`` when enough;
    ``why``: why a breaching window does not fire (empty otherwise)."""

    consecutive: int
    fire: bool
    why: str = ""


def apply_hysteresis(
    monitor: _CountsBreaches, result: MonitorResult, consecutive_before: int
) -> Firing:
    """Count consecutive breaches; a window without data neither counts nor resets."""
    if result.status != "ok":
        return Firing(consecutive_before, False)
    consecutive = consecutive_before + 1 if result.breached else 0
    fire = result.breached and consecutive >= monitor.consecutive_breaches
    why = ""
    if result.breached and not fire:
        why = (
            f"hysteresis: breach {consecutive} of {monitor.consecutive_breaches} in a row "
            "needed to fire"
        )
    return Firing(consecutive, fire, why)
