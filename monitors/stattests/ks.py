"""Two-sample Kolmogorov-Smirnov test.

Name: ``ks``. Feature types: numeric. Direction: ``p_value``.

Value: ``D = sup_x |F_ref(x) - F_cur(x)|``, the largest distance between the two
empirical CDFs (unitless, in [0, 1]); it is also the effect size compared with the
effect-size floor. The p-value follows ``scipy.stats.ks_2samp(method="auto")``
exactly: the exact distribution when both samples have at most 10,000 values
(``D`` is then rounded to the lattice ``h / lcm(n_ref, n_cur)`` as scipy does),
otherwise the asymptotic ``kstwo.sf(D, round(n_ref n_cur / (n_ref + n_cur)))``, here
computed by :mod:`monitors.stattests.kolmogorov` (within 1e-8 relative of scipy's value
for every p-value above 1e-300, in about 0.1 ms where scipy takes up to seconds).
One exception, far in the tail: where scipy's exact value costs more than about a
millisecond and the asymptotic one is at most 1e-15, the asymptotic one is returned
(``method="asymp_tail"``; scipy's is then below 1e-14, measured; see
:func:`ks_p_value`): a drifted feature's D cost 0.1-0.2 s there and decided nothing.
The exact distribution is scipy's (``_attempt_exact_2kssamp``) computed by
:mod:`monitors.stattests.distributions` where its lattice is small (a 30-row window
against 7,000 rows: under a millisecond, scipy's value within 1e-12 relative, and no
``import scipy.stats``, 0.65 s of a fresh process), scipy's own past that.
NaN is excluded (and counted by ``missing_share``); infinite values take part.

Streaming: between consecutive reference breakpoints the reference ECDF is constant
and the current ECDF is non-decreasing, so the supremum is reached at a breakpoint or
just before one. The counts of current values ``<= v`` and ``< v`` at every
breakpoint ``v`` (which add up across chunks) therefore give the exact ``D``. When
the profile keeps fewer breakpoints than distinct reference values, ``D`` is a lower
bound of the true statistic, larger by at most ``details["statistic_error_bound"]``
(the largest reference share inside one gap).

Calibrated on its own p-value (:class:`KsNull`): a window too small for even ``D = 1``
to be significant at the level is ``insufficient_data``; ``bias_corrected`` is ``D``
minus its no-drift mean and ``min_detectable`` the critical ``D`` at the level.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from driftgate.monitors.profile import NumericProfile
from driftgate.monitors.stattests.distributions import (
    SMIRNOV_MAX_N,
    ks_exact_two_sided,
    smirnov_sf,
)
from driftgate.monitors.stattests.kolmogorov import (
    kolmogorov_isf,
    kolmogorov_mean,
    kolmogorov_sf,
)
from driftgate.monitors.stattests.registry import (
    Calibration,
    InsufficientData,
    NullModel,
    StatTest,
    TestOutcome,
    register,
)
from driftgate.monitors.window import NumericWindow

# scipy.stats.ks_2samp(method="auto") is exact up to this sample size.
SCIPY_MAX_AUTO_N = 10_000
# scipy's exact two-sample distribution for unequal sizes is a recurrence over the
# larger sample (``m`` columns) in a band of ``2 D n + 1`` cells of the smaller one:
# about 7 ns a cell measured (scipy 1.17, compiled), so 150,000 cells are about a
# millisecond. Equal sizes take scipy's O(D n) path, always cheap.
EXACT_BUDGET_CELLS = 150_000
# Past that budget, a D whose asymptotic p-value is at or below this decides nothing
# at any level driftgate uses; there the asymptotic value is returned (method
# ``asymp_tail``), not the exact one that costs up to 0.2 s (issue 32). Measured on a
# grid of sizes 5..10,000 (docs/monitors.md): where the asymptotic value is at most
# 1e-15 scipy's exact one is at most TAIL_EXACT_MAX, so ``p < alpha`` is the same at
# every level above it (measured: at most 1.4e-15 at 753 points).
TAIL_P = 1e-15
TAIL_EXACT_MAX = 1e-14


def ks_statistic(reference: NumericProfile, current: NumericWindow) -> float:
    """The two-sample KS statistic from the profile and the window's counts."""
    n_ref, n_cur = reference.non_missing, current.non_missing
    # Reference counts <= and < each breakpoint, -inf values included.
    counts_through = np.concatenate([[0], np.cumsum(reference.ties[:-1] + reference.gap_counts)])
    ref_le = reference.neg_inf_count + counts_through + reference.ties
    ref_lt = ref_le - reference.ties
    ref_points = np.concatenate(
        [[reference.neg_inf_count], ref_le, ref_lt, [n_ref - reference.pos_inf_count]]
    )
    cur_points = np.concatenate(
        [
            [current.neg_inf_count],
            current.count_le,
            current.count_lt,
            [n_cur - current.pos_inf_count],
        ]
    )
    # Same operations as scipy (integer counts divided by n), hence the same floats.
    differences = ref_points / n_ref - cur_points / n_cur
    max_positive = float(differences.max())
    max_negative = float(np.clip(-differences.min(), 0, 1))
    return max(max_positive, max_negative)


# Cached: the exact distribution costs up to 50 ms a call at these sizes (the
# asymptotic one about 0.1 ms), and a calibrated check asks twice per feature
# (the window's D and D = 1, whether any window of its size could be significant);
# D = 1 and the small windows' few lattice values of D repeat from check to check.
# A pure function of its arguments, so a cached answer is the same answer.
@functools.lru_cache(maxsize=4096)
def ks_p_value(statistic: float, n_ref: int, n_cur: int) -> tuple[float, float, str]:
    """Statistic (lattice-rounded when exact) and p-value as ``ks_2samp(method="auto")``.

    One exception, for speed: in scipy's exact range, when the exact value would cost
    more than about a millisecond (EXACT_BUDGET_CELLS) and the asymptotic value is at
    most TAIL_P, that value is returned (``asymp_tail``): scipy's exact one is then at
    most TAIL_EXACT_MAX (measured, tests/monitors/stattests/test_ks.py), so no decision
    at a level above it differs. Every other p-value is scipy's (within 1e-12 relative
    where :func:`~monitors.stattests.distributions.ks_exact_two_sided` computes it).

    Returns:
        ``(statistic, p_value, method)`` with method ``exact``, ``asymp`` or
        ``asymp_tail``.
    """
    m, n = sorted([float(n_ref), float(n_cur)], reverse=True)
    effective_n = round(m * n / (m + n))  # half to even, as scipy's np.round
    if max(n_ref, n_cur) <= SCIPY_MAX_AUTO_N:
        gcd = math.gcd(n_ref, n_cur)
        if n_ref != n_cur and m * (2 * statistic * n + 1) > EXACT_BUDGET_CELLS:
            # D on scipy's lattice h / lcm, rounded as scipy rounds it.
            lcm = (n_ref // gcd) * n_cur
            rounded = int(np.round(statistic * lcm)) / lcm
            # P(D >= d) >= P(D+ >= d): a one-sided tail above TAIL_P settles it without
            # the two-sided distribution (whose body at small n is scipy's).
            if rounded > 0 and (
                effective_n > SMIRNOV_MAX_N or smirnov_sf(effective_n, rounded) <= TAIL_P
            ):
                tail = kolmogorov_sf(rounded, effective_n)
                if tail <= TAIL_P:
                    return rounded, float(np.clip(tail, 0, 1)), "asymp_tail"
        # scipy's exact distribution (monitors.stattests.distributions: the same values
        # within 1e-12, without importing scipy at small sizes).
        success, rounded, p_value = ks_exact_two_sided(n_ref, n_cur, statistic)
        statistic = float(rounded)
        if success:
            return statistic, float(np.clip(p_value, 0, 1)), "exact"
    p_value = kolmogorov_sf(statistic, effective_n)
    return statistic, float(np.clip(p_value, 0, 1)), "asymp"


@functools.lru_cache(maxsize=4096)
def ks_no_drift(n_ref: int, n_cur: int, level: float) -> tuple[float, float]:
    """Expected D with no drift, and the smallest D significant at ``level``, for these
    sizes: Kolmogorov's distribution at the effective size ``n m / (n + m)`` (what
    :func:`ks_p_value` uses past the exact range; a close bound inside it)."""
    m, n = sorted([float(n_ref), float(n_cur)], reverse=True)
    effective_n = max(1, round(m * n / (m + n)))
    return kolmogorov_mean(effective_n), kolmogorov_isf(level, effective_n)


def ks_test(reference: NumericProfile, current: NumericWindow) -> TestOutcome:
    """KS statistic and p-value of one numeric feature (see the module docstring)."""
    if reference.non_missing == 0:
        raise InsufficientData("the reference has no non-missing values")
    if current.non_missing == 0:
        raise InsufficientData("the current window has no non-missing values")
    statistic = ks_statistic(reference, current)
    statistic, p_value, method = ks_p_value(statistic, reference.non_missing, current.non_missing)
    return TestOutcome(
        value=statistic,
        p_value=p_value,
        effect_size=statistic,
        details={
            "exact_statistic": reference.ks_exact,
            "statistic_error_bound": reference.ks_max_gap_share,
            "method": method,
        },
    )


class KsNull(NullModel):
    """KS's own p-value, with Kolmogorov's distribution for what the window could flag."""

    def calibrate(self, name, result, reference, current, level) -> Calibration:
        floor = result.effect_size_floor or 0.0
        extreme = ks_p_value(1.0, reference.non_missing, current.non_missing)[1]
        if extreme > level:
            reason = (
                f"{current.non_missing} values: even D = 1 is not significant at level {level:.3g}"
            )
            return Calibration(result.p_value, None, floor, True, reason)
        expected, critical = ks_no_drift(reference.non_missing, current.non_missing, level)
        return Calibration(result.p_value, result.value - expected, max(floor, critical), False)


register(
    StatTest(
        name="ks",
        func=ks_test,
        feature_types=("numeric",),
        direction="p_value",
        units="KS statistic D = sup|F_ref - F_cur| (unitless, 0..1)",
        default_threshold=0.05,
        effect_size="D, the KS statistic",
        effect_label="D",
        default_effect_size_floor=0.05,
        null=KsNull(),
        evidence=1,
    )
)
