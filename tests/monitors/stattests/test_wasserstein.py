"""Normalised Wasserstein distance: exact where it should be, bounded where not."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from driftgate.monitors.stattests.wasserstein import wasserstein_test
from tests.monitors.conftest import run


def scipy_normed(reference, current) -> float:
    reference, current = np.asarray(reference, float), np.asarray(current, float)
    return stats.wasserstein_distance(reference, current) / np.std(reference)


def test_hand_computed():
    # Moving every value by +1 costs W1 = 1; the reference std of [0, 2] is 1.
    outcome = run(wasserstein_test, [0.0, 2.0], [1.0, 3.0])
    assert outcome.details["wasserstein_distance"] == pytest.approx(1.0)
    assert outcome.value == pytest.approx(1.0)


def test_discrete_values_are_exact(rng):
    reference, current = rng.integers(0, 10, 3000), rng.integers(1, 12, 2000)
    outcome = run(wasserstein_test, reference, current)
    assert outcome.value == pytest.approx(scipy_normed(reference, current), rel=1e-9)


def test_continuous_within_reported_bound(rng):
    reference, current = rng.normal(size=4000), rng.normal(0.3, 1.2, size=3000)
    outcome = run(wasserstein_test, reference, current)
    error = abs(outcome.value - scipy_normed(reference, current))
    assert error <= outcome.details["error_bound"] + 1e-12
    assert outcome.details["error_bound"] < 1e-2


def test_bounded_profile_within_reported_bound(rng):
    reference, current = rng.normal(size=20_000), rng.normal(0.1, 1, size=5000)
    outcome = run(wasserstein_test, reference, current, ks_max_breakpoints=300)
    error = abs(outcome.value - scipy_normed(reference, current))
    assert error <= outcome.details["error_bound"] + 1e-12


def test_constant_reference_is_zero_or_infinite():
    assert run(wasserstein_test, [5.0] * 10, [5.0] * 3).value == 0.0
    assert run(wasserstein_test, [5.0] * 10, [5.0, 6.0]).value == float("inf")


def test_infinite_values_are_excluded(rng):
    reference = rng.integers(0, 5, 100).astype(float)
    current = np.concatenate([reference, [np.inf, -np.inf]])
    assert run(wasserstein_test, reference, current).value == pytest.approx(0.0, abs=1e-12)


integers = st.lists(st.integers(-20, 20).map(float), min_size=2, max_size=60)


@settings(max_examples=80, deadline=None)
@given(reference=integers, current=integers)
def test_property_matches_scipy_where_current_is_on_reference_values(reference, current):
    # Current values at reference values leave every gap empty: the result is exact.
    current = [v for v in current if v in set(reference)] or reference[:1]
    outcome = run(wasserstein_test, reference, current)
    expected = scipy_normed(reference, current) if np.std(reference) > 0 else None
    if expected is not None:
        assert outcome.value == pytest.approx(expected, rel=1e-9, abs=1e-12)
    assert outcome.details["error_bound"] == 0.0
