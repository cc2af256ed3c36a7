"""First Wasserstein (earth mover's) distance, normalised by the reference std.

Name: ``wasserstein``. Feature types: numeric. Direction: ``distance``.

Value: ``W1(ref, cur) / std_ref`` where ``W1 = integral |F_ref(x) - F_cur(x)| dx`` over
finite values and ``std_ref`` is the reference population standard deviation
(ddof=0): "how far, in reference standard deviations, mass has to move". A constant
reference gives 0 for identical data and ``inf`` otherwise (Evidently divides by
``max(std, 0.001)`` instead).

Streaming: current values are summarised per gap between reference breakpoints by
their count and sum, i.e. each gap's mass sits at its mean. Where the reference ECDF
is constant over a gap (always, for an exact profile) and the current ECDF does not
cross the reference level inside the gap, this leaves ``W1`` exactly unchanged
(the integral over the gap is linear in the values there); the outer gaps never
cross. Elsewhere the error is at most the gap's mass times its width, summed in
``details["error_bound"]`` (in the same normalised units; 0 means exact).
"""

from __future__ import annotations

import numpy as np
from scipy import stats

from driftgate.monitors.profile import NumericProfile
from driftgate.monitors.stattests.mean_shift import standardised
from driftgate.monitors.stattests.registry import InsufficientData, StatTest, TestOutcome, register
from driftgate.monitors.window import NumericWindow


def _atoms(points: np.ndarray, counts: np.ndarray, gap_counts, gap_sums):
    """Weighted atoms: the points with their counts plus each non-empty gap at its mean."""
    filled = gap_counts > 0
    values = np.concatenate([points, gap_sums[filled] / gap_counts[filled]])
    weights = np.concatenate([counts, gap_counts[filled]]).astype(float)
    keep = weights > 0
    return values[keep], weights[keep]


def wasserstein_test(reference: NumericProfile, current: NumericWindow) -> TestOutcome:
    """Normalised W1 between the reference and the window (see the module docstring)."""
    n_ref, n_cur = reference.finite_count, current.finite_count
    if n_ref == 0:
        raise InsufficientData("the reference has no finite values")
    if n_cur == 0:
        raise InsufficientData("the current window has no finite values")
    points = reference.breakpoints
    ref_values, ref_weights = _atoms(
        points, reference.ties, reference.gap_counts, reference.gap_sums
    )
    cur_at_points = current.count_le - current.count_lt
    cur_values, cur_weights = _atoms(points, cur_at_points, current.gap_counts, current.gap_sums)
    distance = float(stats.wasserstein_distance(ref_values, cur_values, ref_weights, cur_weights))

    widths = np.diff(points)
    ref_bound = float(np.sum(reference.gap_counts * widths)) / n_ref
    # Inner current gap j lies between points j-1 and j; levels in finite counts.
    ref_le = np.cumsum(reference.ties + np.concatenate([[0], reference.gap_counts]))
    cur_le = current.count_le - current.neg_inf_count
    cur_lt = current.count_lt - current.neg_inf_count
    inner_counts = current.gap_counts[1:-1]
    left_level = ref_le[:-1] * n_cur  # reference level just right of point j-1, scaled
    crossing = (cur_le[:-1] * n_ref < left_level) & (left_level < cur_lt[1:] * n_ref)
    uncertain = (inner_counts >= 2) & ((reference.gap_counts > 0) | crossing)
    cur_bound = float(np.sum(inner_counts[uncertain] * widths[uncertain])) / n_cur
    bound = standardised(ref_bound + cur_bound, reference.std) if ref_bound + cur_bound else 0.0
    return TestOutcome(
        value=abs(standardised(distance, reference.std)),
        details={"wasserstein_distance": distance, "error_bound": abs(bound)},
    )


register(
    StatTest(
        name="wasserstein",
        func=wasserstein_test,
        feature_types=("numeric",),
        direction="distance",
        units="reference standard deviations (W1 / std_ref)",
        default_threshold=0.1,
    )
)
