"""Population Stability Index on the profile's bins.

Name: ``psi``. Feature types: numeric, categorical. Direction: ``distance``.

Value: ``PSI = sum_i (p_cur[i] - p_ref[i]) * ln(p_cur[i] / p_ref[i])`` in nats, >= 0,
symmetric (it equals ``KL(ref||cur) + KL(cur||ref)``). Same bins and smoothing as
``kl``. Common reading: < 0.1 stable, 0.1-0.25 moderate shift, > 0.25 major shift.

Calibrated: the binned bootstrap shared with ``kl`` and ``js``
(:class:`~monitors.stattests.binned.BinnedBootstrap`), on :func:`psi_rows`.
"""

from __future__ import annotations

import numpy as np

from driftgate.monitors.stattests.binned import (
    BinnedBootstrap,
    moved_details,
    proportions,
    smooth,
    smooth_rows,
)
from driftgate.monitors.stattests.registry import StatTest, TestOutcome, register


def population_stability_index(p_ref: np.ndarray, p_cur: np.ndarray) -> float:
    """``sum (cur - ref) ln(cur / ref)``; both vectors must be positive."""
    return float(np.sum((p_cur - p_ref) * np.log(p_cur / p_ref)))


def psi_rows(p_ref: np.ndarray, p_cur: np.ndarray, absent: np.ndarray | None) -> np.ndarray:
    """:func:`population_stability_index` of each row pair of raw proportions, smoothed
    as the engine smooths them (vectorised for the bootstrap null)."""
    r, c = smooth_rows(p_ref, absent), smooth_rows(p_cur, absent)
    # (c - r) ln(c / r), 0 where r = 0 (the denominator's bins: the same mask as before).
    with np.errstate(divide="ignore", invalid="ignore"):
        terms = np.divide(c, r)
        np.log(terms, out=terms)
        terms *= c - r
    np.copyto(terms, 0.0, where=~(r > 0))
    return np.sum(terms, axis=1)


def psi_test(reference, current) -> TestOutcome:
    """PSI in nats on smoothed bin proportions."""
    p_ref, p_cur = proportions(reference, current)
    value = population_stability_index(smooth(p_ref), smooth(p_cur))
    return TestOutcome(value=value, effect_size=value, details=moved_details(reference, current))


register(
    StatTest(
        name="psi",
        func=psi_test,
        feature_types=("numeric", "categorical"),
        direction="distance",
        units="nats (sum (cur - ref) ln(cur / ref), >= 0)",
        default_threshold=0.2,
        effect_size="PSI itself (nats)",
        null=BinnedBootstrap(psi_rows),
        evidence=3,
    )
)
