"""The registry of drift statistics, keyed by name.

Every statistic is a pure function ``(reference, current) -> TestOutcome`` taking a
feature's fitted profile and the window's counts for that feature, registered with
the feature types it accepts, the direction of its value and the value's units:

* ``p_value``: the result carries a p-value; the feature drifts when the (corrected)
  p-value is below the threshold *and* the effect size reaches the effect-size floor;
* ``distance``: the value itself is compared; the feature drifts when
  ``value >= threshold``.

Unknown names fail with :class:`UnknownStatTestError`, which lists the known ones.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from driftgate.core.errors import DriftgateError

Direction = Literal["p_value", "distance"]


class UnknownStatTestError(DriftgateError, KeyError):
    """A statistic name that is not registered; the message lists the known names."""

    def __str__(self) -> str:  # KeyError would print the repr of the message
        return str(self.args[0])


class InsufficientData(Exception):
    """Raised by a statistic that cannot be computed on this window (e.g. no values)."""


@dataclass(frozen=True)
class TestOutcome:
    """What one statistic computed on one feature.

    Attributes:
        value: The statistic, in the test's units.
        p_value: The p-value (``p_value`` tests only).
        effect_size: The effect size compared with the effect-size floor
            (``p_value`` tests only).
        details: Extra JSON-able facts (e.g. signed change, error bounds).
    """

    __test__ = False  # not a pytest test class

    value: float
    p_value: float | None = None
    effect_size: float | None = None
    details: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class StatTest:
    """A registered statistic.

    Attributes:
        name: Registry key (``ks``, ``kl``, ...).
        func: ``(reference, current) -> TestOutcome``.
        feature_types: Feature types it accepts (``numeric``, ``categorical``).
        direction: ``p_value`` or ``distance`` (see the module docstring).
        units: Units of ``value``.
        default_threshold: Threshold used when none is given (alpha for p-value tests).
        effect_size: What ``effect_size`` is, for ``p_value`` tests.
        default_effect_size_floor: Floor used when none is given (``p_value`` tests).
    """

    __test__ = False

    name: str
    func: Callable[..., TestOutcome]
    feature_types: tuple[str, ...]
    direction: Direction
    units: str
    default_threshold: float
    effect_size: str | None = None
    default_effect_size_floor: float | None = None

    def accepts(self, feature_type: str) -> bool:
        return feature_type in self.feature_types


STATTESTS: dict[str, StatTest] = {}


def register(test: StatTest) -> StatTest:
    """Add a statistic to the registry (one line at the bottom of each test module)."""
    if test.direction not in ("p_value", "distance"):
        raise ValueError(f"stat test {test.name!r}: direction must be p_value or distance")
    if test.name in STATTESTS:
        raise ValueError(f"stat test {test.name!r} is already registered")
    STATTESTS[test.name] = test
    return test


def get_stattest(name: str) -> StatTest:
    """The registered statistic called ``name``.

    Raises:
        UnknownStatTestError: No such statistic; the message lists the known names.
    """
    try:
        return STATTESTS[name]
    except KeyError:
        raise UnknownStatTestError(
            f"unknown stat test {name!r}; known stat tests: {sorted(STATTESTS)}"
        ) from None
