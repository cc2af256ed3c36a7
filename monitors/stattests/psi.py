"""Population Stability Index on the profile's bins.

Name: ``psi``. Feature types: numeric, categorical. Direction: ``distance``.

Value: ``PSI = sum_i (p_cur[i] - p_ref[i]) * ln(p_cur[i] / p_ref[i])`` in nats, >= 0,
symmetric (it equals ``KL(ref||cur) + KL(cur||ref)``). Same bins and smoothing as
``kl``. Common reading: < 0.1 stable, 0.1-0.25 moderate shift, > 0.25 major shift.
"""

from __future__ import annotations

import numpy as np

from driftgate.monitors.stattests.binned import proportions, smooth
from driftgate.monitors.stattests.registry import StatTest, TestOutcome, register


def population_stability_index(p_ref: np.ndarray, p_cur: np.ndarray) -> float:
    """``sum (cur - ref) ln(cur / ref)``; both vectors must be positive."""
    return float(np.sum((p_cur - p_ref) * np.log(p_cur / p_ref)))


def psi_test(reference, current) -> TestOutcome:
    """PSI in nats on smoothed bin proportions."""
    p_ref, p_cur = proportions(reference, current)
    return TestOutcome(value=population_stability_index(smooth(p_ref), smooth(p_cur)))


register(
    StatTest(
        name="psi",
        func=psi_test,
        feature_types=("numeric", "categorical"),
        direction="distance",
        units="nats (sum (cur - ref) ln(cur / ref), >= 0)",
        default_threshold=0.2,
    )
)
