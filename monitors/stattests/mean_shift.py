"""Shift of the mean in reference standard deviations.

Name: ``mean_shift``. Feature types: numeric. Direction: ``distance``.

Value: ``|mean_cur - mean_ref| / std_ref`` over finite values, where ``std_ref`` is the
reference population standard deviation (ddof=0); ``details["shift"]`` keeps the
sign. A constant reference (``std_ref = 0``) gives 0 when the means are equal and
``inf`` otherwise. Infinite values are excluded here (they are counted in the
report's feature info and move the KS and binned statistics).

Calibrated: a two-sample z-test of the means (:class:`MeanShiftNull`),
``z = shift / sqrt(1/n + 1/n_ref)``.
"""

from __future__ import annotations

import math

from driftgate.monitors.profile import NumericProfile
from driftgate.monitors.stattests.registry import (
    Bound,
    Calibration,
    InsufficientData,
    NullModel,
    StatTest,
    TestOutcome,
    register,
)
from driftgate.monitors.window import NumericWindow


def standardised(difference: float, std: float) -> float:
    """``difference / std`` with a constant reference handled (0 or inf)."""
    if std > 0:
        return difference / std
    return 0.0 if difference == 0 else float("inf") * (1 if difference > 0 else -1)


def mean_shift_test(reference: NumericProfile, current: NumericWindow) -> TestOutcome:
    """Absolute mean shift in reference standard deviations."""
    if reference.finite_count == 0:
        raise InsufficientData("the reference has no finite values")
    if current.finite_count == 0:
        raise InsufficientData("the current window has no finite values")
    current_mean = current.finite_sum / current.finite_count
    shift = standardised(current_mean - reference.mean, reference.std)
    return TestOutcome(
        value=abs(shift),
        effect_size=abs(shift),
        details={
            "shift": shift,
            "reference_mean": reference.mean,
            "current_mean": current_mean,
            "reference_std": reference.std,
        },
    )


class MeanShiftNull(NullModel):
    """The two-sample z-test of the means (module docstring)."""

    def bound(self, name, reference, n, threshold, level) -> Bound:
        from scipy import stats  # imported when used (issue 32)

        if n < 2:
            return Bound(n, math.inf, True, 0.0, f"{n} finite values: no mean to compare")
        se = math.sqrt(1 / n + 1 / reference.finite_count)
        critical = float(stats.norm.isf(level / 2)) * se
        return Bound(n, max(threshold, critical), False, se * math.sqrt(2 / math.pi))

    def calibrate(self, name, result, reference, current, level) -> Calibration:
        from scipy import stats  # imported when used (issue 32)

        n = current.finite_count
        bound = self.bound(name, reference, n, result.threshold, level)
        if bound.insufficient:
            return Calibration(1.0, None, None, True, bound.reason)
        se = math.sqrt(1 / n + 1 / reference.finite_count)
        p_value = float(2 * stats.norm.sf(result.value / se))
        return Calibration(p_value, result.value - bound.null_mean, bound.min_detectable, False)

    def smallest_shift(self, name, reference, n, min_detectable, needed, rng) -> float:
        from scipy import stats  # imported when used (issue 32)

        se = math.sqrt(1 / n + 1 / reference.finite_count)
        return float(min_detectable + stats.norm.ppf(needed) * se)


register(
    StatTest(
        name="mean_shift",
        func=mean_shift_test,
        feature_types=("numeric",),
        direction="distance",
        units="reference standard deviations (|mean_cur - mean_ref| / std_ref)",
        default_threshold=0.25,
        null=MeanShiftNull(),
        effect_size="|mean_cur - mean_ref| / std_ref itself (Cohen's d with the reference std)",
        evidence=7,
    )
)
