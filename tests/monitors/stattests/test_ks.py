"""KS: agreement with scipy.stats.ks_2samp (statistic 1e-12, p-value 1e-9 relative)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from driftgate.monitors.stattests.ks import ks_test
from tests.monitors.conftest import fit, run, window_of


def assert_matches_scipy(reference, current, **fit_kwargs) -> None:
    ours = run(ks_test, reference, current, **fit_kwargs)
    ref = np.asarray(reference, dtype=float)
    cur = np.asarray(current, dtype=float)
    theirs = stats.ks_2samp(ref[~np.isnan(ref)], cur[~np.isnan(cur)])
    assert ours.value == pytest.approx(theirs.statistic, abs=1e-12, rel=0)
    assert ours.p_value == pytest.approx(theirs.pvalue, rel=1e-9, abs=1e-300)


def test_hand_computed_statistic():
    # ECDFs of [1, 2, 3] and [2, 3, 4] differ by 1/3 at x = 1 (and x = 3).
    outcome = run(ks_test, [1.0, 2.0, 3.0], [2.0, 3.0, 4.0])
    assert outcome.value == pytest.approx(1 / 3)
    assert outcome.effect_size == outcome.value


@pytest.mark.parametrize(
    ("n_ref", "n_cur"), [(1, 1), (1, 7), (3, 5), (50, 50), (200, 37), (1000, 3000)]
)
def test_random_continuous(rng, n_ref, n_cur):
    assert_matches_scipy(rng.normal(size=n_ref), rng.normal(0.2, 1.1, size=n_cur))


def test_ties_and_discrete(rng):
    assert_matches_scipy(rng.integers(0, 4, 800), rng.integers(0, 5, 600))
    assert_matches_scipy(rng.poisson(2.0, 5000), rng.poisson(2.1, 5000))
    assert_matches_scipy([1.0] * 10, [1.0] * 4 + [2.0])


def test_heavy_tails(rng):
    assert_matches_scipy(rng.standard_cauchy(3000), rng.standard_cauchy(2000) * 1.5)
    assert_matches_scipy(rng.pareto(0.5, 1000), rng.pareto(0.6, 999))


def test_infinite_values_take_part(rng):
    reference = np.concatenate([rng.normal(size=300), [np.inf, -np.inf]])
    current = np.concatenate([rng.normal(size=200), [np.inf] * 20, [-np.inf] * 3])
    assert_matches_scipy(reference, current)


def test_nan_is_excluded(rng):
    reference = rng.normal(size=400)
    reference[::7] = np.nan
    current = rng.normal(size=300)
    current[::3] = np.nan
    assert_matches_scipy(reference, current)


def test_asymptotic_path_above_scipy_exact_limit(rng):
    # Beyond 10,000 values scipy switches to the asymptotic distribution; so do we.
    reference = np.round(rng.normal(size=20_000), 2)  # few distinct values: still exact
    current = np.round(rng.normal(0.03, 1, size=15_000), 2)
    assert_matches_scipy(reference, current)
    assert run(ks_test, reference, current).details["method"] == "asymp"


def test_large_continuous_exact_profile(rng):
    reference, current = rng.normal(size=30_000), rng.normal(0.02, 1, size=25_000)
    assert_matches_scipy(reference, current, ks_max_breakpoints=None)


def test_bounded_profile_statistic_within_reported_bound(rng):
    reference, current = rng.normal(size=30_000), rng.normal(0.05, 1, size=20_000)
    outcome = run(ks_test, reference, current, ks_max_breakpoints=500)
    truth = stats.ks_2samp(reference, current).statistic
    bound = outcome.details["statistic_error_bound"]
    assert not outcome.details["exact_statistic"]
    assert 0 < bound <= 1 / 500
    assert outcome.value <= truth + 1e-12
    assert truth <= outcome.value + bound + 1e-12


def test_streaming_gives_the_one_shot_result(rng):
    reference, current = rng.normal(size=2000), rng.normal(0.1, 1, size=1500)
    profile = fit(reference)
    one_shot = ks_test(profile.features["x"], window_of(profile, current))
    chunked = ks_test(profile.features["x"], window_of(profile, current, chunk_rows=97))
    assert (chunked.value, chunked.p_value) == (one_shot.value, one_shot.p_value)


grid_values = st.lists(
    st.one_of(
        st.integers(-5, 5).map(float),  # ties
        st.floats(-1e6, 1e6, allow_nan=False, allow_infinity=False),
        st.sampled_from([np.inf, -np.inf]),
    ),
    min_size=1,
    max_size=60,
)


@settings(max_examples=150, deadline=None)
@given(reference=grid_values, current=grid_values)
def test_property_matches_scipy(reference, current):
    assert_matches_scipy(reference, current)


@settings(max_examples=60, deadline=None)
@given(values=grid_values)
def test_property_identical_data_gives_zero_and_p_one(values):
    outcome = run(ks_test, values, values)
    assert outcome.value == 0.0
    assert outcome.p_value == 1.0


ALPHAS = (0.05, 0.01, 1e-3, 0.05 / 720 / 25, 1e-9)


@pytest.mark.parametrize("shift", [0.0, 0.01, 0.02, 0.03, 0.05, 0.08])
def test_asymptotic_p_values_and_decisions_match_scipy(rng, shift):
    # Past scipy's exact range the p-value is kolmogorov_sf's, not kstwo.sf's: the same
    # value within its tolerance, hence the same decisions, from p near 1 to p near 0.
    reference, current = rng.normal(size=24_000), rng.normal(shift, 1, size=16_000)
    ours = run(ks_test, reference, current, ks_max_breakpoints=None)
    theirs = stats.ks_2samp(reference, current)
    assert ours.details["method"] == "asymp"
    assert ours.value == pytest.approx(theirs.statistic, abs=1e-12, rel=0)
    assert ours.p_value == pytest.approx(theirs.pvalue, rel=1e-8, abs=1e-300)
    for alpha in ALPHAS:
        assert (ours.p_value < alpha) == (theirs.pvalue < alpha), alpha
