"""Change in the share of missing values.

Name: ``missing_share``. Feature types: numeric, categorical. Direction: ``distance``.

Value: ``|missing_cur / rows_cur - missing_ref / rows_ref|``, an absolute change of a
share (0..1); ``details["change"]`` keeps the sign. Missing means NaN / None / NA
(``pd.isna``); infinite values are not missing. This is the statistic that makes a
rising missing share visible, since every other test excludes missing values.

Calibrated: one-sided and exact (:class:`MissingShareNull`). H0: the window's missing
rate is at most the reference rate plus the threshold;
``p = P(Binomial(n, ref + threshold) >= missing)``; only a *rise* breaches. The
binomial is :mod:`monitors.stattests.distributions`' (scipy's within 1e-12 relative,
without importing scipy up to 1,000 rows).
"""

from __future__ import annotations

import math

import numpy as np

from driftgate.monitors.stattests.distributions import binom_isf, binom_sf
from driftgate.monitors.stattests.registry import (
    Bound,
    Calibration,
    InsufficientData,
    NullModel,
    StatTest,
    TestOutcome,
    register,
)


def missing_share_test(reference, current) -> TestOutcome:
    """Absolute change of the missing share between reference and window."""
    if current.rows == 0:
        raise InsufficientData("the current window has no rows")
    if reference.rows == 0:
        raise InsufficientData("the reference has no rows")
    change = current.missing_share - reference.missing_share
    return TestOutcome(
        value=abs(change),
        effect_size=abs(change),
        details={
            "change": change,
            "reference_missing_share": reference.missing_share,
            "current_missing_share": current.missing_share,
        },
    )


class MissingShareNull(NullModel):
    """The exact binomial null of a rise of the missing share (module docstring)."""

    shift_units = "rise of the missing share"

    def bound(self, name, reference, n, threshold, level) -> Bound:
        bound = reference.missing_share + threshold
        if bound >= 1 or n < 1:
            return Bound(n, math.inf, True, 0.0, "reference share + threshold >= 1 or no rows")
        critical_count = int(binom_isf(level, n, bound)) + 1
        insufficient = bound**n > level
        # Over the threshold too: the rise itself must reach it.
        share = max(critical_count / n, reference.missing_share + threshold)
        return Bound(
            n=n,
            min_detectable=share - reference.missing_share,
            insufficient=insufficient,
            null_mean=0.0,
            reason=(
                f"{n} rows: even all missing is not significant at level {level:.3g}"
                if insufficient
                else ""
            ),
        )

    def calibrate(self, name, result, reference, current, level) -> Calibration:
        threshold = result.threshold
        n, missing = current.rows, current.missing_count
        bound = self.bound(name, reference, n, threshold, level)
        limit = reference.missing_share + threshold
        p_value = 1.0 if limit >= 1 else binom_sf(missing - 1, n, limit)
        return Calibration(
            p_value=p_value,
            bias_corrected=(missing / n) - reference.missing_share if n else None,
            min_detectable=bound.min_detectable,
            insufficient=bound.insufficient,
            reason=bound.reason,
        )

    def over(self, result) -> bool:
        # One-sided: only a rise of the missing share is over the threshold.
        return result.details["change"] >= result.threshold

    def smallest_shift(self, name, reference, n, min_detectable, needed, rng) -> float:
        limit = reference.missing_share + min_detectable
        count = math.ceil(limit * n - 1e-9)
        for rise in np.linspace(0.001, 1 - reference.missing_share, 1000):
            if binom_sf(count - 1, n, reference.missing_share + rise) >= needed:
                return float(rise)
        return math.inf


register(
    StatTest(
        name="missing_share",
        func=missing_share_test,
        feature_types=("numeric", "categorical"),
        direction="distance",
        units="absolute change of the missing share (0..1)",
        default_threshold=0.05,
        null=MissingShareNull(),
        effect_size="|change of the missing share| itself",
        evidence=6,
        counts_per_client=True,
    )
)
