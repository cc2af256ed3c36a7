"""Jensen-Shannon distance on the profile's bins.

Name: ``js``. Feature types: numeric, categorical. Direction: ``distance``.

Value: the Jensen-Shannon *distance* with base-2 logarithms,
``sqrt(JSD)`` where ``JSD = 1/2 KL_2(p_ref || m) + 1/2 KL_2(p_cur || m)`` and
``m = (p_ref + p_cur) / 2``; bounded in [0, 1] (1: disjoint supports). It is what
``scipy.spatial.distance.jensenshannon(p, q, base=2)`` returns. JS is finite with
empty bins, so the raw proportions are used (no smoothing). Evidently's
``jensenshannon`` uses the natural logarithm (bounded by sqrt(ln 2) ≈ 0.83): multiply
our value by ``sqrt(ln 2)`` to compare on the same bins.

Calibrated: the binned bootstrap shared with ``kl`` and ``psi``
(:class:`~monitors.stattests.binned.BinnedBootstrap`), on :func:`js_rows`.
"""

from __future__ import annotations

import numpy as np

from driftgate.monitors.stattests.binned import (
    BinnedBootstrap,
    log_ratio_terms,
    moved_details,
    proportions,
)
from driftgate.monitors.stattests.registry import StatTest, TestOutcome, register


def jensen_shannon_distance(p: np.ndarray, q: np.ndarray) -> float:
    """Base-2 Jensen-Shannon distance of two probability vectors."""
    m = (p + q) / 2

    def half_kl(a: np.ndarray) -> float:
        mask = a > 0
        return float(np.sum(a[mask] * np.log2(a[mask] / m[mask]))) / 2

    divergence = max(half_kl(p) + half_kl(q), 0.0)  # rounding can give -1e-17
    return float(min(np.sqrt(divergence), 1.0))


def js_rows(p_ref: np.ndarray, p_cur: np.ndarray, absent: np.ndarray | None) -> np.ndarray:
    """:func:`jensen_shannon_distance` of each row pair of raw proportions (JS needs no
    smoothing, so ``absent`` changes nothing; vectorised for the bootstrap null)."""
    m = (p_ref + p_cur) / 2
    a = log_ratio_terms(p_ref, p_ref, m, np.log2)
    b = log_ratio_terms(p_cur, p_cur, m, np.log2)
    return np.sqrt(np.clip((a.sum(axis=1) + b.sum(axis=1)) / 2, 0.0, 1.0))


def js_test(reference, current) -> TestOutcome:
    """Jensen-Shannon distance (base 2) on raw bin proportions."""
    p_ref, p_cur = proportions(reference, current)
    value = jensen_shannon_distance(p_ref, p_cur)
    return TestOutcome(value=value, effect_size=value, details=moved_details(reference, current))


register(
    StatTest(
        name="js",
        func=js_test,
        feature_types=("numeric", "categorical"),
        direction="distance",
        units="Jensen-Shannon distance, log base 2 (0..1)",
        default_threshold=0.1,
        effect_size="the Jensen-Shannon distance itself (0..1)",
        null=BinnedBootstrap(js_rows),
        evidence=4,
    )
)
