"""Our small-size null distributions agree with scipy's (issue 32).

``monitors.stattests.distributions`` replaces scipy's exact two-sample KS distribution,
the binomial tail and the one-sided Kolmogorov (Smirnov) sum at the sizes where they are
cheap, so that a small window's check never imports ``scipy.stats``. Each is compared
with scipy's own function here, across sizes, ties, unequal sizes and the tails.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import special, stats
from scipy.stats._stats_py import _attempt_exact_2kssamp

from driftgate.monitors.stattests import distributions as dist
from driftgate.monitors.stattests.kolmogorov import kolmogorov_sf

RTOL = 1e-12  # the stated tolerance (module docstring)


def _rel(ours: float, theirs: float) -> float:
    return abs(ours - theirs) / theirs if theirs > 0 else abs(ours)


@pytest.mark.parametrize(
    ("n1", "n2"),
    [
        (5, 7),
        (7, 5),
        (1, 2),
        (3, 3),
        (30, 30),  # equal sizes: scipy's own formula
        (100, 100),
        (40, 60),  # gcd 20: ties on the lattice
        (30, 7000),
        (7000, 30),  # the demo's 30-row window against its reference
        (29, 7000),
        (30, 10_000),
        (1000, 30),
        (99, 10_000),
        (300, 200),  # past KS_MAX_ROWS: scipy's own
        (1999, 500),
    ],
)
def test_exact_two_sample_ks_is_scipys(n1, n2):
    g = math.gcd(n1, n2)
    for d in np.linspace(0.0, 1.0, 241):
        theirs = _attempt_exact_2kssamp(n1, n2, g, d, "two-sided")
        ours = dist.ks_exact_two_sided(n1, n2, d)
        assert ours[0] == theirs[0]
        assert ours[1] == theirs[1]  # the same lattice rounding of D
        if theirs[2] >= dist.KS_MIN_OWN_P:
            assert _rel(ours[2], theirs[2]) <= RTOL, (d, ours, theirs)


def test_exact_two_sample_ks_at_the_windows_lattice_values():
    # Every D a 30-row window can have against 7,000 rows (h / lcm): p from 1 to 1e-83.
    n1, n2 = 7000, 30
    lcm = 7000 * 30 // math.gcd(n1, n2)
    for h in range(0, lcm + 1, 37):
        theirs = _attempt_exact_2kssamp(n1, n2, math.gcd(n1, n2), h / lcm, "two-sided")
        ours = dist.ks_exact_two_sided(n1, n2, h / lcm)
        assert ours[1] == theirs[1]
        assert _rel(ours[2], theirs[2]) <= RTOL, (h, ours, theirs)


def test_large_lattices_are_scipys_own():
    # Past KS_MAX_CELLS the compiled recurrence is cheaper: its float, unchanged.
    d = 0.02
    theirs = _attempt_exact_2kssamp(7000, 8159, 1, d, "two-sided")
    assert dist.ks_exact_two_sided(7000, 8159, d) == (theirs[0], theirs[1], theirs[2])


@pytest.mark.parametrize("n", [1, 2, 5, 30, 31, 100, 720, 1000])
@pytest.mark.parametrize("p", [1e-6, 0.001, 0.01, 0.05, 0.0500001, 0.1, 0.3, 0.5, 0.9, 0.999])
def test_binomial_tail_is_scipys(n, p):
    k = np.arange(-1, n + 2)
    theirs = stats.binom.sf(k, n, p)
    ours = np.array([dist.binom_sf(int(x), n, p) for x in k])
    shown = theirs > 1e-300
    assert np.all(ours[~shown] < 1e-290)
    assert np.max(np.abs(ours[shown] - theirs[shown]) / theirs[shown]) <= RTOL
    for q in (1e-12, 1e-9, 8.7e-6, 1e-4, 0.01, 0.05, 0.5, 0.9):
        assert dist.binom_isf(q, n, p) == stats.binom.isf(q, n, p), q


def test_binomial_quantile_ties_are_settled_as_scipy_settles_them():
    # sf(k) equal to q exactly: n = 1, q = p; Binomial(5, 1/2) has P(X > 2) = 1/2.
    for q, n, p in ((0.05, 1, 0.05), (0.01, 1, 0.01), (0.5, 5, 0.5), (0.5, 31, 0.5)):
        assert dist.binom_isf(q, n, p) == stats.binom.isf(q, n, p)


def test_binomial_outside_the_own_range_is_scipys():
    assert dist.binom_sf(40, 5000, 0.01) == stats.binom.sf(40, 5000, 0.01)
    assert dist.binom_isf(1e-5, 5000, 0.01) == stats.binom.isf(1e-5, 5000, 0.01)
    assert dist.binom_sf(0, 10, 0.0) == stats.binom.sf(0, 10, 0.0)


@pytest.mark.parametrize("n", [1, 2, 3, 5, 10, 29, 30, 31, 50, 100, 140, 141, 200, 500, 1000])
def test_smirnov_sum_is_scipys(n):
    for d in np.linspace(0.0005, 0.9995, 400):
        theirs = special.smirnov(n, d)
        if theirs > 1e-300:
            assert _rel(dist.smirnov_sf(n, d), theirs) <= RTOL, d


@pytest.mark.parametrize("n", [1, 2, 5, 10, 29, 30, 100, 140, 141, 300, 500])
def test_kolmogorov_at_small_n_is_scipys(n):
    # Ours in scipy's closed-form and 2 * smirnov regions, scipy's in the body.
    for d in np.linspace(0.0, 1.0, 300):
        theirs = float(stats.kstwo.sf(d, n))
        if 0 < theirs < 1e-300:  # subnormal: fewer digits on both sides
            continue
        assert _rel(kolmogorov_sf(d, n), theirs) <= RTOL, d
