"""chi2: agreement with scipy.stats.chi2_contingency, unseen categories, effect size."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from driftgate.monitors.stattests.chi2 import chi2_test
from tests.monitors.conftest import run


def test_matches_chi2_contingency(rng):
    reference = rng.choice(list("abcd"), 500, p=[0.4, 0.3, 0.2, 0.1])
    current = rng.choice(list("abcd"), 300, p=[0.3, 0.3, 0.2, 0.2])
    outcome = run(chi2_test, reference, current, "categorical")
    table = np.array(
        [[np.sum(reference == c) for c in "abcd"], [np.sum(current == c) for c in "abcd"]]
    )
    expected = stats.chi2_contingency(table, correction=False)
    assert outcome.value == pytest.approx(expected.statistic, rel=1e-12)
    assert outcome.p_value == pytest.approx(expected.pvalue, rel=1e-9)
    assert outcome.details["degrees_of_freedom"] == 3
    assert outcome.effect_size == pytest.approx(np.sqrt(expected.statistic / 800), rel=1e-12)


def test_unseen_category_is_a_column_with_zero_reference_count():
    outcome = run(
        chi2_test, ["a"] * 50 + ["b"] * 50, ["a"] * 10 + ["b"] * 10 + ["z"] * 5, "categorical"
    )
    expected = stats.chi2_contingency([[50, 50, 0], [10, 10, 5]], correction=False)
    assert outcome.value == pytest.approx(expected.statistic, rel=1e-12)
    assert outcome.details["unseen_categories"] == ["z"]
    assert outcome.details["unseen_share"] == pytest.approx(0.2)


def test_single_category_gives_no_evidence():
    outcome = run(chi2_test, ["a"] * 5, ["a"] * 3, "categorical")
    assert (outcome.value, outcome.p_value) == (0.0, 1.0)


def test_total_change_has_cramers_v_one():
    outcome = run(chi2_test, ["a"] * 40, ["b"] * 40, "categorical")
    assert outcome.effect_size == pytest.approx(1.0)
