"""Null distributions of the statistics at small sizes, in numpy and ``math`` (issue 32).

Not a statistic. ``import scipy.stats`` costs about 0.65 s of CPU, a sixth of a fresh
``driftgate drift-check`` of a 30-row window, which asked scipy for three numbers per
feature: the exact two-sample KS p-value, the binomial tail of ``missing_share`` and
(for the KS tail shortcut) Kolmogorov's one-sided distribution. Each is computed here
for the sizes where that is cheap; past them scipy's own function is imported and
called, lazily (a large window pays for scipy as before; a small one never imports it).

* :func:`ks_exact_two_sided` is ``scipy.stats._stats_py._attempt_exact_2kssamp(n1, n2,
  g, d, "two-sided")``: the same lattice rounding of ``D`` (``h = round(D lcm)``); for
  equal sizes scipy's own formula (``_compute_prob_outside_square``, plain Python, the
  same floats); for unequal ones the share of the lattice paths from ``(0, 0)`` to
  ``(m, n)`` that leave the band ``|x n/g - y m/g| < h``, by Hodges' recursion on the
  number of paths that have left, which is a sum of positive terms (no ``1 - p``
  cancellation: Viehmann's point), one ``np.cumsum`` per step of the smaller sample,
  each row scaled by ``C(m + y, y)`` so nothing overflows. Used while the smaller sample
  has at most ``KS_MAX_ROWS`` values and the lattice at most ``KS_MAX_CELLS`` cells (30 x
  7,000 rows: 0.2 M, under a millisecond); scipy's past it.
  Agreement with scipy: within 1e-12 relative for p-values above 1e-200
  (``tests/monitors/stattests/test_distributions.py``; measured at most about 1e-14
  where KS_MAX_CELLS admits); below 1e-200 scipy's value is returned.
* :func:`binom_sf` / :func:`binom_isf` are ``scipy.stats.binom.sf`` / ``.isf`` for
  ``n <= BINOM_MAX_N``: the upper tail summed from the exact ``log C(n, j)`` (``math.comb``)
  in log space, within 1e-12 relative of scipy (measured at most 4e-13); ``isf(q)`` is
  the smallest ``k`` with ``sf(k) <= q``, the tie ``sf(k) = q`` settled exactly
  (fractions), as scipy settles it.
* :func:`smirnov_sf` is ``scipy.special.smirnov(n, d)`` for ``n <= SMIRNOV_MAX_N``: Birnbaum
  and Tingey's exact sum, in log space (scipy sums it in double-double), within 1e-12
  relative (measured at most 1.2e-13).
"""

from __future__ import annotations

import functools
import math
from fractions import Fraction

import numpy as np

# Own exact KS distribution while the smaller sample has at most KS_MAX_ROWS values and
# the lattice at most KS_MAX_CELLS cells (smaller size x (larger + 1)): one numpy pass
# per value of the smaller sample, about 0.7 ms at 30 x 7,000 and 2.5 ms at 99 x 10,000
# (loaded machine; scipy's compiled recurrence 0.2-0.5 ms there, 0.65 s to import).
# scipy's past it, where a window that large pays for its import anyway and the own
# pass would cost up to ten times scipy's (7 ms against 0.4 ms at 1,000 x 999).
KS_MAX_ROWS = 100
KS_MAX_CELLS = 1_000_000
# Below this the scaled path counts lose digits to underflow: scipy's value instead.
KS_MIN_OWN_P = 1e-200
# Own binomial tail and Smirnov sum up to this size (n + 1 exact log-binomials, cached).
BINOM_MAX_N = 1_000
SMIRNOV_MAX_N = 1_000


@functools.lru_cache(maxsize=64)
def log_comb_row(n: int) -> np.ndarray:
    """``log C(n, j)`` for ``j = 0..n``, from the exact integers (read-only)."""
    out = np.empty(n + 1)
    c = 1
    for j in range(n + 1):
        out[j] = math.log(c)
        c = c * (n - j) // (j + 1)
    out.flags.writeable = False
    return out


# --- the exact two-sample KS distribution ------------------------------------------


def _prob_outside_square(n: int, h: int) -> float:
    """``scipy.stats._stats_py._compute_prob_outside_square(n, h)``, the same operations:
    ``P(D_{n,n} >= h/n)`` as ``2 A0 (1 - A1 (1 - A2 (...)))``, Horner-like."""
    p = 0.0
    k = math.floor(n / h)
    while k >= 0:
        p1 = 1.0
        for j in range(h):
            p1 = (n - k * h - j) * p1 / (n + k * h + j + 1)
        p = p1 * (1.0 - p)
        k -= 1
    return 2 * p


def _prob_outside_band(m: int, n: int, g: int, h: int) -> float:
    """The share of lattice paths ``(0, 0) -> (m, n)`` (``m >= n``) that leave the band
    ``|x n/g - y m/g| < h`` somewhere: ``P(D_{m,n} >= h / lcm)``.

    ``E(x, y)``, the number of paths to ``(x, y)`` that have left, is every path there
    (``C(x + y, y)``) outside the band and ``E(x - 1, y) + E(x, y - 1)`` inside it (a
    cumulative sum along ``x`` over the band's cells, which are contiguous); row ``y``
    is kept divided by ``C(m + y, y)``, so the answer is the last cell of the last row.
    """
    mg, ng = m // g, n // g
    x = np.arange(m + 1)
    every = np.ones(m + 1)  # C(x + y, y) / C(m + y, y), row y
    left = np.zeros(m + 1)  # E(x, y) / C(m + y, y)
    for y in range(n + 1):
        if y:
            every *= (x + y) / (m + y)
            left *= y / (m + y)  # C(m + y - 1, y - 1) / C(m + y, y)
        # Inside: y mg - h < x ng < y mg + h.
        low = max((y * mg - h) // ng + 1, 0)
        high = min(-(-(y * mg + h) // ng) - 1, m)
        if high < low:  # every path has left by this row
            return 1.0
        band = np.cumsum(left[low : high + 1])
        if low > 0:
            band += every[low - 1]
        left = every.copy()
        left[low : high + 1] = band
    return float(left[m])


def ks_exact_two_sided(n1: int, n2: int, d: float) -> tuple[bool, float, float]:
    """``scipy.stats._stats_py._attempt_exact_2kssamp(n1, n2, gcd, d, "two-sided")``:
    ``(success, D on the lattice h / lcm(n1, n2), P(D_{n1,n2} >= D))``."""
    g = math.gcd(n1, n2)
    lcm = (n1 // g) * n2
    h = int(np.round(d * lcm))
    rounded = h * 1.0 / lcm
    if h == 0:
        return True, rounded, 1.0
    if n1 == n2:
        return _checked(rounded, _prob_outside_square(n1, h))
    m, n = max(n1, n2), min(n1, n2)
    if n <= KS_MAX_ROWS and n * (m + 1) <= KS_MAX_CELLS:
        # A share of paths: past 1 only by rounding (scipy's recursion stays at 1).
        p = min(_prob_outside_band(m, n, g, h), 1.0)
        if p >= KS_MIN_OWN_P:
            return _checked(rounded, p)
    try:  # private in scipy: the asymptotic distribution when it is gone
        from scipy.stats._stats_py import _attempt_exact_2kssamp
    except ImportError:  # pragma: no cover - depends on the scipy version
        return False, rounded, math.nan
    success, rounded, p = _attempt_exact_2kssamp(n1, n2, g, d, "two-sided")
    return bool(success), float(rounded), float(p)


def _checked(rounded: float, p: float) -> tuple[bool, float, float]:
    # As scipy: a probability outside [0, 1] is a failure (the caller goes asymptotic).
    return (0.0 <= p <= 1.0), rounded, p


# --- the binomial tail ---------------------------------------------------------------


def _own_binomial(n, p) -> bool:
    return isinstance(n, int | np.integer) and 1 <= n <= BINOM_MAX_N and 0.0 < p < 1.0


@functools.lru_cache(maxsize=256)
def _binomial_upper_tails(n: int, p: float) -> np.ndarray:
    """``P(X >= j)`` for ``j = 0..n + 1``, ``X ~ Binomial(n, p)`` (read-only)."""
    j = np.arange(n + 1, dtype=float)
    log_pmf = log_comb_row(n) + j * math.log(p) + (n - j) * math.log1p(-p)
    # Summed from the far end: the small terms first, no cancellation.
    tails = np.append(np.cumsum(np.exp(log_pmf)[::-1])[::-1], 0.0)
    tails.flags.writeable = False
    return tails


def binom_sf(k: float, n: int, p: float) -> float:
    """``P(X > k)`` for ``X ~ Binomial(n, p)``: ``scipy.stats.binom.sf(k, n, p)``."""
    if not _own_binomial(n, p) or math.isnan(k):
        from scipy import stats

        return float(stats.binom.sf(k, n, p))
    k = math.floor(k)
    if k < 0:
        return 1.0
    if k >= n:
        return 0.0
    return float(_binomial_upper_tails(n, p)[k + 1])


def _exact_sf(k: int, n: int, p: float) -> Fraction:
    q = Fraction(p)
    return sum(
        (math.comb(n, j) * q**j * (1 - q) ** (n - j) for j in range(k + 1, n + 1)), Fraction(0)
    )


def binom_isf(q: float, n: int, p: float) -> float:
    """The smallest ``k`` with ``P(X > k) <= q``: ``scipy.stats.binom.isf(q, n, p)``."""
    if not _own_binomial(n, p) or not 0.0 < q < 1.0:
        from scipy import stats

        return float(stats.binom.isf(q, n, p))
    sf = _binomial_upper_tails(n, p)[1:]  # sf[k] = P(X > k), k = 0..n
    k = int(np.argmax(sf <= q))  # sf[n] = 0 <= q: always found
    # A tail within rounding of q is settled exactly (scipy's own arithmetic gets such
    # ties right, e.g. n = 1, p = q): one below k may be <= q, k itself may be > q.
    if k >= 1 and abs(sf[k - 1] - q) <= 1e-9 * q and _exact_sf(k - 1, n, p) <= Fraction(q):
        return float(k - 1)
    if k < n and abs(sf[k] - q) <= 1e-9 * q and _exact_sf(k, n, p) > Fraction(q):
        return float(k + 1)
    return float(k)


# --- Kolmogorov's one-sided distribution ----------------------------------------------


def smirnov_sf(n: int, d: float) -> float:
    """``P(D+_n >= d)``: ``scipy.special.smirnov(n, d)``, Birnbaum and Tingey's sum
    ``d sum_j C(n, j) (1 - d - j/n)^(n-j) (d + j/n)^(j-1)`` over ``j <= n (1 - d)``,
    for ``n <= SMIRNOV_MAX_N`` (scipy's own past it)."""
    if not (isinstance(n, int | np.integer) and 1 <= n <= SMIRNOV_MAX_N) or math.isnan(d):
        from scipy import special

        return float(special.smirnov(n, d))
    if d <= 0.0:
        return 1.0
    if d >= 1.0:
        return 0.0
    last = math.floor(n * (1 - d))
    j = np.arange(last + 1, dtype=float)
    with np.errstate(divide="ignore"):
        log_terms = (
            log_comb_row(n)[: last + 1]
            + (n - j) * np.log1p(-d - j / n)
            + (j - 1) * np.log(d + j / n)
        )
    return float(d * np.exp(log_terms).sum())
