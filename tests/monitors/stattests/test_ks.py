"""KS: agreement with scipy.stats.ks_2samp (statistic 1e-12, p-value 1e-9 relative; in
scipy's exact range the far tail, p below 1e-15, is asymptotic: see the last tests)."""

from __future__ import annotations

import math
import time

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import optimize, stats

from driftgate.monitors.stattests import ks
from driftgate.monitors.stattests.kolmogorov import kolmogorov_sf
from driftgate.monitors.stattests.ks import ks_p_value, ks_test
from tests.monitors.conftest import fit, run, window_of


def assert_matches_scipy(reference, current, **fit_kwargs) -> None:
    ours = run(ks_test, reference, current, **fit_kwargs)
    ref = np.asarray(reference, dtype=float)
    cur = np.asarray(current, dtype=float)
    theirs = stats.ks_2samp(ref[~np.isnan(ref)], cur[~np.isnan(cur)])
    assert ours.value == pytest.approx(theirs.statistic, abs=1e-12, rel=0)
    if ours.details["method"] == "asymp_tail":  # the stated tolerance of the far tail
        assert ours.p_value <= ks.TAIL_P
        assert theirs.pvalue <= ks.TAIL_EXACT_MAX
        return
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


# -- the far tail (issue 32): scipy's exact value there costs up to 0.2 s and decides
# nothing; ks_p_value returns the asymptotic one, within the tolerance stated in
# monitors/stattests/ks.py: scipy's exact value is at most TAIL_EXACT_MAX wherever the
# asymptotic one is returned, and every other p-value is scipy's own, bit for bit.


def _scipy_exact(d: float, n_ref: int, n_cur: int) -> float:
    from scipy.stats._stats_py import _attempt_exact_2kssamp

    success, _rounded, p_value = _attempt_exact_2kssamp(
        max(n_ref, n_cur), min(n_ref, n_cur), math.gcd(n_ref, n_cur), d, "two-sided"
    )
    assert success
    return float(p_value)


@pytest.mark.parametrize(
    ("n_ref", "n_cur"), [(7000, 8159), (10_000, 9999), (10_000, 5000), (7000, 30), (8159, 120)]
)
def test_far_tail_is_asymptotic_and_below_every_decision_level(n_ref, n_cur):
    effective_n = round(n_ref * n_cur / (n_ref + n_cur))
    # The D where the asymptotic p-value reaches TAIL_P, then further into the tail.
    crossing = optimize.brentq(
        lambda d: math.log(max(kolmogorov_sf(d, effective_n), 1e-300)) - math.log(ks.TAIL_P),
        1e-3,
        0.999,
    )
    for factor in (1.01, 1.03, 1.1, 1.5, 3.0):  # past the crossing by more than a lattice step
        d = min(1.0, crossing * factor)
        _statistic, p_value, method = ks_p_value.__wrapped__(d, n_ref, n_cur)
        assert method == "asymp_tail", (d, p_value)
        assert p_value <= ks.TAIL_P
        exact = _scipy_exact(d, n_ref, n_cur)
        assert exact <= ks.TAIL_EXACT_MAX, (d, exact)
        for alpha in (*ALPHAS, 1e-12):
            assert (p_value < alpha) == (exact < alpha), alpha


@pytest.mark.parametrize(
    ("n_ref", "n_cur"), [(7000, 8159), (10_000, 5000), (500, 700), (4000, 4000), (7000, 30)]
)
def test_outside_the_far_tail_the_p_value_is_scipys_exact_one(n_ref, n_cur):
    # From p near 1 to just above the tail: scipy's exact value, within 1e-12 relative
    # (monitors.stattests.distributions computes it at the sizes where that is cheap).
    effective_n = round(n_ref * n_cur / (n_ref + n_cur))
    for z in (0.3, 0.8, 1.36, 2.0, 2.8, 3.5, 4.5, 5.5):
        d = z / math.sqrt(effective_n)
        if d >= 1:
            continue
        statistic, p_value, method = ks_p_value.__wrapped__(d, n_ref, n_cur)
        if method == "asymp_tail":
            assert kolmogorov_sf(statistic, effective_n) <= ks.TAIL_P
            continue
        assert method == "exact"
        assert p_value == pytest.approx(_scipy_exact(d, n_ref, n_cur), rel=1e-12, abs=0), z


def test_the_tail_shortcut_is_what_makes_a_drifted_feature_cheap():
    # 7,000 x 8,159 (the demo's window) at D = 0.2: scipy's exact value takes 0.1-0.2 s
    # of CPU; the shortcut a fraction of a millisecond. Measured in CPU time, so that
    # a loaded machine does not decide; a 20x margin either way.
    started = time.process_time()
    _scipy_exact(0.2, 7000, 8159)
    exact_seconds = time.process_time() - started
    started = time.process_time()
    for _ in range(10):
        assert ks_p_value.__wrapped__(0.2, 7000, 8159)[2] == "asymp_tail"
    shortcut_seconds = (time.process_time() - started) / 10
    assert shortcut_seconds * 20 < exact_seconds, (shortcut_seconds, exact_seconds)
