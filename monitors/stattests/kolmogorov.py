"""Kolmogorov's distribution of ``D_n`` (``scipy.stats.kstwo``), in microseconds at every n.

Not a statistic: the distribution ``ks`` asks for past scipy's exact two-sample range,
at the samples' effective size ``n = round(n_ref n_cur / (n_ref + n_cur))``.

Why not ``kstwo`` itself: its survival function in the tail (``n D^2 >= 2.2``, every
p-value below about 0.03, so every decision) is ``2 * smirnov(n, D)``, Birnbaum and
Tingey's exact sum of about ``n (1 - D)`` terms in double-double arithmetic: 0.13-0.2 s
a call at ``n = 500,000`` on a quiet machine, several seconds on a loaded one; its
body for ``n <= 100,000`` and ``n D^1.5 <= 1.4`` is Durbin's matrix power (up to 0.26 s
at ``n = 100,000``); and ``kstwo.mean`` integrates the density, 2 s at ``n = 500`` and
32 s at ``n = 50,000`` (docs/monitors.md has the figures).

What this module does instead, region by region as scipy's ``_kolmogn`` splits them:

* the tail for ``SUM_MIN_N < n <= SUM_MAX_N``: the same sum, evaluated as an integral.
  Its term ``C(n, j) (1 - D - j/n)^(n-j) (D + j/n)^(j-1)`` is a smooth function of ``j``
  (the binomial through the Beta function), one peak about ``n / (4 sqrt(n) D)`` terms
  wide, negligible at both ends; so by Euler-Maclaurin the sum over the integers is the
  integral plus half the two end terms, up to the ends' derivatives, which are as
  negligible as the ends. A fixed Gauss-Legendre rule on ``PANELS`` panels does it:
  agreement with ``scipy.special.smirnov`` measured at 1e-11 relative or better;
* the body where scipy would use Durbin's matrix: Pelz and Good's expansion (what
  scipy uses there past ``n = 100,000``), ``1 - cdf`` with ``cdf`` below 1e-4 there, so
  the p-value (above 0.9999) differs from scipy's by the expansion's error on ``cdf``
  (measured below 1e-8);
* for ``n <= SUM_MIN_N``, where scipy has a closed form (``t = n D`` at most 1/2 or at
  least ``n - 1``) or uses ``2 smirnov(n, D)`` (``D >= 1/2``; ``n D^2 > 4`` up to
  ``n = 140``, ``n D^2 >= 2.2`` past it: every p-value below about 1e-3), the same formula,
  the sum by :func:`monitors.stattests.distributions.smirnov_sf` (within 1e-12 relative,
  no scipy import: a 30-row window's KS tail shortcut asks for it, issue 32);
* everywhere else scipy's own value, which costs there at most about a millisecond:
  the body for ``n <= SUM_MIN_N`` (Durbin's matrix, Pomeranz), and past ``SUM_MAX_N``,
  where scipy's ``smirnov`` itself switches to the closed form
  ``exp(-(6 n D + 1)^2 / (18 n))``. scipy is imported where it is used, not with this
  module.

Tolerance, measured by ``tests/monitors/stattests/test_kolmogorov.py`` on a grid of
``n`` (3 to 4,000,000) and ``z = sqrt(n) D`` (0.05 to 19): ``kolmogorov_sf`` within 1e-8
relative of ``kstwo.sf`` for every value above 1e-300 (measured: at most 1e-8 in
Durbin's body near ``n = 500`` where the p-value is 0.99998, 6e-10 in the tail up to
``n = 10^6``; subnormal values below 1e-300 keep fewer digits on both sides), hence the
same decision ``p < alpha`` at every level tried; ``kolmogorov_isf`` a root of
``kstwo.sf`` within 1e-8 (``kstwo.isf`` stops earlier: up to 2e-4 off at level 1e-12);
``kolmogorov_mean`` within 1e-7 of ``kstwo.mean``.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from driftgate.monitors.stattests.distributions import smirnov_sf as _exact_smirnov_sf

# At or below this size scipy's kstwo.sf costs under about 1 ms (measured): used as is.
SUM_MIN_N = 500
# scipy.special.smirnov sums exactly up to this size, and uses a closed form past it.
SUM_MAX_N = 1_000_000
# scipy's region boundaries (scipy.stats._ksstats._kolmogn), mirrored so that each
# region gets the value scipy would compute there.
TAIL_NX2 = 2.2
ZERO_NX2 = 370.0
DURBIN_MAX_N = 100_000
DURBIN_MAX_NX15 = 1.4

PANELS = 16
_NODES, _WEIGHTS = np.polynomial.legendre.leggauss(32)


def _log_terms(j: np.ndarray, n: int, d: float) -> np.ndarray:
    """log of Birnbaum-Tingey's term ``C(n, j) (1 - d - j/n)^(n-j) (d + j/n)^(j-1)``."""
    from scipy import special

    log_binomial = -math.log(n + 1) - special.betaln(n - j + 1, j + 1)
    return log_binomial + (n - j) * np.log1p(-d - j / n) + (j - 1) * np.log(d + j / n)


def smirnov_sf(n: int, d: float) -> float:
    """``P(D+_n >= d)``, the one-sided statistic's survival function, as
    ``scipy.special.smirnov(n, d)`` computes it for ``0 < d < 1``, from the sum's integral
    (see the module docstring); meant for ``n >= SUM_MIN_N`` and ``n d^2 >= 1``."""
    last = math.floor(n * (1 - d))
    edges = np.linspace(0.0, float(last), PANELS + 1)
    half_widths = np.diff(edges)[:, None] / 2
    nodes = (half_widths * _NODES + (edges[:-1, None] + half_widths)).ravel()
    with np.errstate(divide="ignore"):
        ends = _log_terms(np.array([0.0, float(last)]), n, d)
        log_values = _log_terms(nodes, n, d)
    top = float(max(log_values.max(), ends.max()))
    weights = (half_widths * _WEIGHTS).ravel()
    total = float(np.dot(weights, np.exp(log_values - top))) + 0.5 * float(np.exp(ends - top).sum())
    return d * math.exp(top) * total


def _kstwo_sf(d: float, n: int) -> float:
    from scipy import stats

    return float(stats.kstwo.sf(d, n))


def _small_n_sf(d: float, n: int) -> float:
    """``kstwo.sf(d, n)`` for ``n <= SUM_MIN_N``: where scipy's ``_kolmogn`` has a closed
    form or ``2 smirnov(n, d)`` (the tail, every p-value below about 1e-3), the same
    formula here (:func:`~monitors.stattests.distributions.smirnov_sf`, within 1e-12
    relative); in the body (Durbin's matrix, Pomeranz) scipy's own, imported then."""
    if math.isnan(d):
        return _kstwo_sf(d, n)
    t = n * d
    if t <= 0.5 or d <= 0.0:
        return 1.0
    if d >= 1.0:
        return 0.0
    if t <= 1.0:
        return _kstwo_sf(d, n)
    if t >= n - 1:  # Ruben-Gambino, scipy's formula
        return float(np.clip(2 * (1.0 - d) ** n, 0.0, 1.0))
    nx2 = t * d
    if d >= 0.5 or (n <= 140 and nx2 > 4.0) or (n > 140 and TAIL_NX2 <= nx2 < ZERO_NX2):
        return float(np.clip(2 * _exact_smirnov_sf(n, d), 0.0, 1.0))
    if n > 140 and nx2 >= ZERO_NX2:
        return 0.0
    return _kstwo_sf(d, n)


def _pelz_good_sf(n: int, d: float) -> float:
    try:  # scipy's own Pelz-Good expansion (private; kstwo.sf is the fallback, only slower)
        from scipy.stats._ksstats import _kolmogn_PelzGood
    except ImportError:  # pragma: no cover - depends on the scipy version
        return _kstwo_sf(d, n)
    return float(np.clip(1.0 - _kolmogn_PelzGood(n, d, cdf=True), 0.0, 1.0))


def kolmogorov_sf(d: float, n: int) -> float:
    """``scipy.stats.kstwo.sf(d, n)`` within 1e-8 relative, in about 0.1 ms (n >= 1)."""
    if n <= SUM_MIN_N:
        return _small_n_sf(d, n)
    t = n * d
    if n > SUM_MAX_N or not 0.0 < d < 0.5 or t <= 1.0 or t >= n - 1:
        return _kstwo_sf(d, n)  # cheap here (the module docstring)
    nx2 = t * d
    if nx2 >= ZERO_NX2:
        return 0.0
    if nx2 >= TAIL_NX2:
        return min(1.0, 2.0 * smirnov_sf(n, d))
    if n <= DURBIN_MAX_N and n * d**1.5 <= DURBIN_MAX_NX15:
        return _pelz_good_sf(n, d)
    return _kstwo_sf(d, n)  # Pelz-Good in scipy: cheap


@functools.lru_cache(maxsize=4096)
def kolmogorov_isf(p: float, n: int) -> float:
    """The ``d`` with ``kolmogorov_sf(d, n) = p`` (``kstwo.isf(p, n)``), by bisection on
    the survival function above (``kstwo.isf`` calls scipy's slow sum again and again)."""
    from scipy import optimize, stats

    if not 0.0 < p < 1.0:
        return float(stats.kstwo.isf(p, n))
    low, high = 0.0, 1.0
    if kolmogorov_sf(high, n) >= p:
        return high
    return float(
        optimize.brentq(
            lambda d: kolmogorov_sf(d, n) - p, low, high, xtol=1e-15, rtol=4 * np.finfo(float).eps
        )
    )


@functools.lru_cache(maxsize=4096)
def kolmogorov_mean(n: int) -> float:
    """``E[D_n]`` (``kstwo.mean(n)``: the integral of the survival function, here on
    the survival function above; scipy integrates the density, seconds a call)."""
    from scipy import integrate

    # In z = sqrt(n) d the survival function is 1 below z = 1 / (2 sqrt(n)) and below
    # 1e-80 past z = 10: the integral runs over the rest, in units of z.
    root = math.sqrt(n)
    start, stop = 0.5 / root, min(10.0, root)
    # The survival function has a kink where scipy's regions (and so kolmogorov_sf's)
    # meet: at t = n d = 1, in the tail at n d^2 = TAIL_NX2, at Durbin's n d^1.5 =
    # DURBIN_MAX_NX15. Given as breakpoints, quad stops subdividing around them: about
    # 250 evaluations instead of 650-820 past n = 100, the same value within 2e-10
    # relative (measured at n = 484 to 200,000; issue 32).
    kinks = (1.0 / root, math.sqrt(TAIL_NX2), (DURBIN_MAX_NX15 / n) ** (2 / 3) * root)
    integral, _error = integrate.quad(
        lambda z: kolmogorov_sf(z / root, n),
        start,
        stop,
        epsabs=1e-13,
        epsrel=1e-11,
        limit=200,
        points=[z for z in kinks if start < z < stop] or None,
    )
    return (start + integral) / root
