"""Kullback-Leibler divergence on the profile's bins.

Name: ``kl``. Feature types: numeric, categorical. Direction: ``distance``.

Value: ``KL(ref || cur) = sum_i p_ref[i] * ln(p_ref[i] / p_cur[i])`` in nats (natural
logarithm), >= 0, unbounded. ``p`` are bin proportions over non-missing values
(numeric: the profile's reference-quantile bins with open outer bins; categorical:
reference plus unseen categories), empty bins smoothed to ``EPSILON = 1e-4`` then
renormalised (see :mod:`monitors.stattests.binned`). The order ``ref || cur`` is the
one Evidently uses.

Calibrated: the binned bootstrap shared with ``psi`` and ``js``
(:class:`~monitors.stattests.binned.BinnedBootstrap`), on :func:`kl_rows`.
"""

from __future__ import annotations

import numpy as np

from driftgate.monitors.stattests.binned import (
    BinnedBootstrap,
    log_ratio_terms,
    moved_details,
    proportions,
    smooth,
    smooth_rows,
)
from driftgate.monitors.stattests.registry import StatTest, TestOutcome, register


def kl_divergence(p: np.ndarray, q: np.ndarray) -> float:
    """``sum p ln(p / q)`` over bins with ``p > 0`` (``q`` must be positive there)."""
    mask = p > 0
    return float(np.sum(p[mask] * np.log(p[mask] / q[mask])))


def kl_rows(p_ref: np.ndarray, p_cur: np.ndarray, absent: np.ndarray | None) -> np.ndarray:
    """:func:`kl_divergence` of each row pair of raw proportions, smoothed as the engine
    smooths them (vectorised for the bootstrap null)."""
    r, c = smooth_rows(p_ref, absent), smooth_rows(p_cur, absent)
    return np.sum(log_ratio_terms(r, r, c), axis=1)


def kl_test(reference, current) -> TestOutcome:
    """KL(ref || cur) in nats on smoothed bin proportions."""
    p_ref, p_cur = proportions(reference, current)
    value = kl_divergence(smooth(p_ref), smooth(p_cur))
    return TestOutcome(value=value, effect_size=value, details=moved_details(reference, current))


register(
    StatTest(
        name="kl",
        func=kl_test,
        feature_types=("numeric", "categorical"),
        direction="distance",
        units="nats (KL(reference || current), natural log, >= 0)",
        default_threshold=0.1,
        effect_size="KL itself (nats)",
        null=BinnedBootstrap(kl_rows),
        evidence=2,
    )
)
