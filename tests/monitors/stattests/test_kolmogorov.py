"""Kolmogorov's distribution: the fast path against scipy's kstwo on a grid of n and D.

Tolerance (stated in monitors/stattests/kolmogorov.py): 1e-8 relative for every
survival probability above 1e-300 (below it the results are subnormal floats, where
neither side keeps 16 digits), and the same decision ``p < alpha`` at every level tried.
The grid covers each of scipy's regions: n on both sides of SUM_MIN_N and DURBIN_MAX_N,
z = sqrt(n) D from Durbin's body through the tail to where the probability underflows.
"""

from __future__ import annotations

import math

import pytest
from scipy import special, stats

from driftgate.monitors.stattests.kolmogorov import (
    SUM_MIN_N,
    kolmogorov_isf,
    kolmogorov_mean,
    kolmogorov_sf,
    smirnov_sf,
)

RELATIVE = 1e-8
ALPHAS = (0.5, 0.05, 0.01, 1e-3, 0.05 / 720 / 25, 1e-9, 1e-15)
Z_GRID = (0.05, 0.1, 0.2, 0.3, 0.45, 0.8, 1.2, 1.48, 1.49, 2.0, 2.5, 3.0, 4.0, 6.0, 10.0, 19.0)


def assert_agrees_with_scipy(n: int) -> None:
    for z in Z_GRID:
        # D on the two samples' lattice is any float in practice: z / sqrt(n) is one.
        d = z / math.sqrt(n)
        ours, theirs = kolmogorov_sf(d, n), float(stats.kstwo.sf(d, n))
        if theirs > 1e-300:
            assert ours == pytest.approx(theirs, rel=RELATIVE, abs=0), (n, z)
        else:
            assert ours <= 1e-300, (n, z)
        for alpha in ALPHAS:
            assert (ours < alpha) == (theirs < alpha), (n, z, alpha)


@pytest.mark.parametrize("n", [3, 140, SUM_MIN_N, SUM_MIN_N + 1, 1234, 5003, 12_345])
def test_survival_function_agrees_with_kstwo(n):
    assert_agrees_with_scipy(n)


@pytest.mark.slow  # scipy's own value takes seconds a point here: the cost this avoids
@pytest.mark.parametrize("n", [99_999, 100_001, 499_999, 1_000_000, 1_000_001, 4_000_000])
def test_survival_function_agrees_with_kstwo_at_large_n(n):
    assert_agrees_with_scipy(n)


@pytest.mark.parametrize("n", [SUM_MIN_N + 1, 2_000, 30_000])
def test_one_sided_sum_as_an_integral_equals_scipys_sum(n):
    # scipy.special.smirnov sums the terms exactly (double-double) up to n = 1e6.
    for z in (1.49, 2.0, 3.0, 5.0, 9.0, 19.0):  # the tail, where kolmogorov_sf uses it
        d = z / math.sqrt(n)
        assert smirnov_sf(n, d) == pytest.approx(special.smirnov(n, d), rel=1e-10), (n, z)


@pytest.mark.parametrize("n", [7, 140, SUM_MIN_N + 1, 5_003, 50_000])
@pytest.mark.parametrize("level", [0.05, 1e-3, 0.05 / 720 / 25, 1e-12])
def test_critical_value_agrees_with_kstwo_isf(n, level):
    critical = kolmogorov_isf(level, n)
    # The root of scipy's own survival function, closer than kstwo.isf finds it: its
    # root finder stops early (kstwo.sf at kstwo.isf(1e-3, 501) is 1.0000014e-3, and
    # kstwo.isf(1e-12, 501) is 2e-4 relative below the root), so the critical D
    # reported moves by that much, toward the exact value.
    ours = stats.kstwo.sf(critical, n)
    theirs = stats.kstwo.sf(stats.kstwo.isf(level, n), n)
    assert ours == pytest.approx(level, rel=1e-8)
    assert abs(ours / level - 1) <= abs(theirs / level - 1) + 1e-12


# 484: past t = 1 and Durbin's boundary, the kinks kolmogorov_mean gives quad.
@pytest.mark.parametrize("n", [1, 7, 60, 484])
def test_mean_agrees_with_kstwo_mean(n):
    assert kolmogorov_mean(n) == pytest.approx(stats.kstwo.mean(n), rel=1e-7)


@pytest.mark.parametrize(
    ("n", "scipy_mean"),
    # stats.kstwo.mean(n) with scipy 1.17.1: 6 s and 32 s to compute, so stored here.
    [(5_000, 0.012252486656278663), (50_000, 0.003881753886040832)],
)
def test_mean_agrees_with_kstwo_mean_at_sizes_scipy_takes_seconds_for(n, scipy_mean):
    assert kolmogorov_mean(n) == pytest.approx(scipy_mean, rel=1e-7)
