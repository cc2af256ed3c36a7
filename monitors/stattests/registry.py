"""The registry of drift statistics, keyed by name.

Every statistic is a pure function ``(reference, current) -> TestOutcome`` taking a
feature's fitted profile and the window's counts for that feature, registered with
the feature types it accepts, the direction of its value and the value's units:

* ``p_value``: the result carries a p-value; the feature drifts when the (corrected)
  p-value is below the threshold *and* the effect size reaches the effect-size floor;
* ``distance``: the value itself is compared; the feature drifts when
  ``value >= threshold``.

A statistic also carries its whole contract with the rest of the loop, so that nothing
outside this package switches on its name:

* ``null``: its no-drift distribution at a window's size (a :class:`NullModel`: the
  calibrated decision of :mod:`monitors.drift` and the planner's bound of
  :mod:`monitors.planner`), or None: it has none, so a monitor on it must say
  ``calibrated: false`` (refused at config load otherwise) and is decided on its
  threshold alone;
* ``evidence``: whether (and where, in order) it is computed on every window for the
  evidence the drift check logs per feature, whatever the monitors ask;
* its effect size: every outcome carries one (``TestOutcome.effect_size``: what
  ``effect_size`` says; for a distance, the distance itself), and a statistic on a
  categorical feature names the levels whose shares moved most
  (``details["moved"]``, :func:`monitors.stattests.binned.moved_levels`), so the evidence
  and the action's text say how large a change is and where, not only that it is
  significant.

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
        effect_size: How large the change is, whatever the window's size: compared
            with the effect-size floor for ``p_value`` tests (KS D, Cramér's V), the
            distance itself for ``distance`` tests.
        details: Extra JSON-able facts (e.g. signed change, error bounds).
    """

    __test__ = False  # not a pytest test class

    value: float
    p_value: float | None = None
    effect_size: float | None = None
    details: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Calibration:
    """The calibrated decision of one statistic on one feature and window."""

    p_value: float
    bias_corrected: float | None
    min_detectable: float | None
    insufficient: bool
    reason: str = ""


@dataclass(frozen=True)
class Bound:
    """What a window of ``n`` rows needs to breach: ``value >= min_detectable``
    (missing_share: the rise of the share), unless ``insufficient``."""

    n: int
    min_detectable: float
    insufficient: bool
    null_mean: float
    reason: str = ""


class NullModel:
    """A statistic's no-drift distribution: what its calibrated decision and the planner
    need. A statistic module registers one (its own, or a shared strategy such as
    :class:`monitors.stattests.binned.BinnedBootstrap`); ``name`` is always the
    registered statistic's name, so one strategy object can serve several statistics.

    Override :meth:`calibrate` (required); :meth:`bound` (with :meth:`smallest_shift`
    and :meth:`bare_rate`) when the decision can be bounded from the profile alone,
    which is what lets ``driftgate monitors plan`` show ``min rows``, ``flags >=`` and
    the smallest detectable shift; :meth:`over` when "over the threshold" is not
    ``value >= threshold``.
    """

    #: Units of :meth:`smallest_shift` as the planner's table shows them.
    shift_units = "reference std"

    def calibrate(self, name: str, result, reference, current, level: float) -> Calibration:
        """The decision of ``result`` (a :class:`monitors.drift.DriftResult` with the
        statistic's value, p-value, details, threshold and effect-size floor) on this
        feature's ``reference`` profile and ``current`` window counts, at ``level``."""
        raise NotImplementedError

    def over(self, result) -> bool:
        """Whether ``result`` is over its threshold: for ``p_value`` statistics the
        effect size reaches the floor, for distances ``value >= threshold``."""
        if result.direction == "p_value":
            floor = result.effect_size_floor or 0.0
            return result.effect_size is not None and result.effect_size >= floor
        return result.value >= result.threshold

    def bound(self, name: str, reference, n: int, threshold: float, level: float) -> Bound | None:
        """The smallest value a window of ``n`` rows can breach with, from the profile
        alone; None when the statistic cannot say before it sees the window."""
        return None

    def smallest_shift(
        self, name: str, reference, n: int, min_detectable: float, needed: float, rng
    ) -> float | None:
        """The smallest change (in :attr:`shift_units`) a window of ``n`` rows detects
        with probability ``needed``, or None when this statistic cannot say."""
        return None

    def bare_rate(self, name: str, reference, n: int, threshold: float) -> float | None:
        """The chance a no-drift window of ``n`` rows is at or over the bare
        ``threshold`` on this feature (the rule before calibration), or None."""
        return None


class OwnPValue(NullModel):
    """The null of a ``p_value`` statistic that computes its own p-value (``chi2``): the
    calibrated decision compares that p-value with the level, and the effect-size floor
    is the threshold; nothing is bounded before the window is seen."""

    def calibrate(self, name, result, reference, current, level) -> Calibration:
        floor = result.effect_size_floor or 0.0
        return Calibration(result.p_value, None, floor, False)


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
        effect_size: What ``effect_size`` is.
        effect_label: Its short name in the texts people read (``D``, ``Cramér's V``),
            for a statistic whose effect size is not the value it is decided on (a
            ``p_value`` test: the value shown is the p-value); None otherwise.
        default_effect_size_floor: Floor used when none is given (``p_value`` tests).
        null: Its no-drift distribution (:class:`NullModel`), or None: it has none, and
            a monitor on it is decided on its threshold alone (``calibrated: false``).
        evidence: Position of the statistic in the evidence every drift check logs per
            feature (lower first), or None: computed only when a monitor asks for it.
        counts_per_client: True when a breach is a count of missing values, each sent
            by one client (the sample store tallies them per client): before such a
            breach pauses inference, the drift check judges the window again without
            the client that sent the most, so one client cannot pause everyone.
    """

    __test__ = False

    name: str
    func: Callable[..., TestOutcome]
    feature_types: tuple[str, ...]
    direction: Direction
    units: str
    default_threshold: float
    effect_size: str | None = None
    effect_label: str | None = None
    default_effect_size_floor: float | None = None
    null: NullModel | None = None
    evidence: float | None = None
    counts_per_client: bool = False

    @property
    def calibrated(self) -> bool:
        """Whether a monitor on this statistic can be decided at its window's size."""
        return self.null is not None

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


def unregister(name: str) -> None:
    """Remove a statistic (tests that register a toy one and clean up after)."""
    STATTESTS.pop(name, None)


def evidence_tests() -> list[str]:
    """The statistics every drift check computes for the evidence it logs, in order."""
    chosen = [t for t in STATTESTS.values() if t.evidence is not None]
    return [t.name for t in sorted(chosen, key=lambda t: t.evidence)]


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
