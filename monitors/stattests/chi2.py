"""Pearson chi-squared test of homogeneity for categorical features.

Name: ``chi2``. Feature types: categorical. Direction: ``p_value``.

The reference and current category counts form a 2 x K contingency table over every
category seen in either (so an unseen category is a column with reference count 0,
which needs no special case). Value: ``X2 = sum (O - E)^2 / E`` with
``E = row total * column total / N``; p-value from the chi-squared distribution with
``K - 1`` degrees of freedom, without continuity correction — the same as
``scipy.stats.chi2_contingency(table, correction=False)``. Effect size: Cramér's V,
``sqrt(X2 / N)`` for a 2-row table (0..1). Missing values are excluded (and counted by
``missing_share``). One category overall gives ``X2 = 0``, ``p = 1``. ``details["moved"]``:
the three levels whose share moved most (:func:`~monitors.stattests.binned.moved_levels`).
Evidence on every window (the categorical features' p-value test, as ``ks`` is the
numeric features').

Evidently's ``chi_square`` is a goodness-of-fit test of the current counts against
the reference proportions; it treats the reference as known rather than a sample and
breaks on unseen categories (expected count 0), hence this deliberate difference.

Calibrated on its own p-value (:class:`~monitors.stattests.registry.OwnPValue`).
"""

from __future__ import annotations

import numpy as np

from driftgate.monitors.profile import CategoricalProfile
from driftgate.monitors.stattests.binned import bin_counts, moved_details
from driftgate.monitors.stattests.registry import (
    InsufficientData,
    OwnPValue,
    StatTest,
    TestOutcome,
    register,
)
from driftgate.monitors.window import CategoricalWindow

MAX_LISTED_UNSEEN = 20


def chi2_test(reference: CategoricalProfile, current: CategoricalWindow) -> TestOutcome:
    """Chi-squared homogeneity test of reference vs current category counts."""
    from scipy import stats  # imported when used (issue 32)

    ref, cur, labels = bin_counts(reference, current)
    if ref.sum() == 0:
        raise InsufficientData("the reference has no non-missing values")
    if cur.sum() == 0:
        raise InsufficientData("the current window has no non-missing values")
    unseen = [label for label, r in zip(labels, ref, strict=True) if r == 0]
    table = np.vstack([ref, cur])
    total = table.sum()
    expected = table.sum(axis=1, keepdims=True) * table.sum(axis=0, keepdims=True) / total
    statistic = float(np.sum((table - expected) ** 2 / expected))
    dof = table.shape[1] - 1
    p_value = float(stats.chi2.sf(statistic, dof)) if dof > 0 else 1.0
    return TestOutcome(
        value=statistic,
        p_value=p_value,
        effect_size=float(np.sqrt(statistic / total)),
        details={
            "degrees_of_freedom": dof,
            "unseen_categories": unseen[:MAX_LISTED_UNSEEN],
            "unseen_category_count": len(unseen),
            "unseen_share": float(cur[ref == 0].sum() / cur.sum()),
            **moved_details(reference, current),
        },
    )


register(
    StatTest(
        name="chi2",
        func=chi2_test,
        feature_types=("categorical",),
        direction="p_value",
        units="chi-squared statistic X2 (2 x K table, K - 1 degrees of freedom)",
        default_threshold=0.05,
        effect_size="Cramer's V = sqrt(X2 / N)",
        effect_label="Cramér's V",
        default_effect_size_floor=0.1,
        null=OwnPValue(),
        # Cramér's V and the levels that moved, for every categorical feature's evidence.
        evidence=8,
    )
)
