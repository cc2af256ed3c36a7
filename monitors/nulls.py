"""No-drift distributions of the drift statistics at a window's size, from the profile alone.

A fixed distance threshold means different things at different window sizes: with 10
bins, ``KL`` of a no-drift window of ``n`` rows is about ``9 / (2 n)`` plus the smoothing
penalty of its empty bins, so ``kl >= 0.1`` breaches on almost every window of 50 rows
without any drift. The calibrated decision (:func:`calibrated`) therefore asks, per
feature and window, two questions:

1. is the value over the monitor's threshold (the effect-size floor, in the statistic's
   units)? and
2. is it improbable under no drift *at this window's size* (p-value <= the monitor's
   per-check level, :mod:`monitors.budget`)?

and breaches only when both hold. Each statistic carries its own no-drift
distribution (``StatTest.null``, :class:`monitors.stattests.registry.NullModel`), so
this module never switches on a statistic's name. What lives here is the machinery the
binned statistics share (:class:`monitors.stattests.binned.BinnedBootstrap`, used by
``kl``, ``psi`` and ``js``):

* a parametric bootstrap of the *two-sample* statistic
  from the profile alone: ``B`` reference samples of the reference's size and ``B``
  windows of ``n`` rows, multinomial, from an estimate of the population the
  reference was drawn from, with the engine's own bins and smoothing. Numeric: the
  reference's bin shares. Categorical: Chao's bootstrap population
  (:func:`_categorical_population`: coverage-shrunk seen levels plus the levels the
  reference is estimated to have missed), and a level neither side holds is no bin,
  so simulated references miss rare levels and windows show them, as in production.
  Windows are drawn by importance sampling (:func:`_tilted_draws`): a share of them from
  the population, the rest from proposals that empty or thin a few of the heaviest
  bins, each weighted by its likelihood ratio, so the far tail a per-check level of
  ``1e-6`` needs (windows with several empty or thin bins, a lattice over empty-bin
  patterns) is estimated rather than extrapolated (:class:`WeightedNull`); the weights
  are summed by the proposals' structure (:func:`_mixture_ratio`). Cached per
  (reference bins, statistic, size on a 3% grid), in memory and on disk beside the
  champion's profile (:func:`keep_nulls_in`), so a check costs 0.03-0.08 s per feature
  the first time at a size and nothing after, in a fresh process too.
  Categorical windows of ``CONDITIONAL_MIN_ROWS`` rows or more: the permutation null
  conditional on the window's and the reference's counts (:func:`conditional_null`):
  there the reference's noise on its rare levels dominates and its rare tail cannot be
  estimated from the reference alone; the permutation needs no estimate. The window's
  ``min_detectable`` stays the profile-only bound (what the planner shows).

The others are in their statistic's module: ``missing_share`` (one-sided exact
binomial), ``mean_shift`` (two-sample z-test), ``ks`` and ``chi2`` (their own p-values;
their effect-size floor is the threshold); ``wasserstein`` has none (``calibrated:
false``: decided on its threshold alone).

A window is ``insufficient_data`` when no possible outcome of its size could breach
(the most extreme value the window can take is not significant at the level): never a
pass, never a breach.
"""

from __future__ import annotations

import functools
import hashlib
import itertools
import logging
import math
import os
import sys
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from driftgate.monitors.profile import CategoricalProfile, NumericProfile
from driftgate.monitors.stattests.registry import (
    STATTESTS,
    Bound,
    Calibration,
    NullModel,
    get_stattest,
)

__all__ = ["Bound", "Calibration"]  # the decision's types, defined beside NullModel

NULL_DRAWS = 4000
TAIL_SHARE = 0.02  # the permutation null's exponential tail (conditional_null)
EXACT_SIZES = 256  # windows up to this size get their own null; larger ones a 3% grid
GRID_STEP = 1.03
_CACHE_SIZE = 4096
# The importance proposals of the binned null (:func:`_proposals`): the heaviest bins
# that may be emptied or thinned, how many at once, by how much, and the share of plain
# draws (which bounds every weight by 1 / PLAIN_SHARE).
TILTED_BINS = 10
MAX_TILTED = 5
THIN_FACTOR = 0.25
PLAIN_SHARE = 0.3
NEGLIGIBLE = 1e-12  # far below any per-check level: bins this unlikely to thin stay
# Categorical windows of at least this many rows are judged against the null
# conditional on the window (:func:`conditional_null`): from here on the reference's
# own noise on its rare levels is a large part of the statistic, and no estimate of the
# population's rare tail from the reference alone matched it (docs/monitors.md).
CONDITIONAL_MIN_ROWS = 500
CONDITIONAL_DRAWS = 2000
# conditional_breach draws its permutations this many at a time (the stream is the same).
PERMUTATION_CHUNK = 250
# Unseen levels of a categorical null population (Chao1 can be huge for an id-like
# column; more levels than this only split an already negligible per-level share).
MAX_UNSEEN_LEVELS = 2048
_cache: OrderedDict[tuple, WeightedNull] = OrderedDict()
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class NullDistribution:
    """Sorted no-drift draws of a statistic at ``n`` rows, with a fitted exponential tail
    (the permutation null of :func:`conditional_null`)."""

    n: int
    draws: np.ndarray  # sorted ascending
    tail_start: float
    tail_scale: float

    @property
    def mean(self) -> float:
        return float(self.draws.mean())

    def p_value(self, value: float) -> float:
        """``P(statistic >= value)`` under no drift (simulated, or the fitted tail)."""
        b = self.draws.size
        at_or_above = b - int(np.searchsorted(self.draws, value, side="left"))
        tail_count = max(int(b * TAIL_SHARE), 20)
        if at_or_above >= tail_count or value <= self.tail_start:
            return (at_or_above + 1) / (b + 1)
        return (tail_count / b) * math.exp(-(value - self.tail_start) / self.tail_scale)

    def critical_value(self, level: float) -> float:
        """The smallest value with ``p_value <= level``."""
        b = self.draws.size
        tail_count = max(int(b * TAIL_SHARE), 20)
        if level * (b + 1) >= tail_count:
            k = math.floor(level * (b + 1)) - 1  # draws strictly above the value
            return float(self.draws[b - 1 - k]) if k >= 0 else float(self.draws[-1])
        return self.tail_start + self.tail_scale * math.log((tail_count / b) / level)


@dataclass(frozen=True)
class WeightedNull:
    """The no-drift distribution of a binned statistic at ``n`` rows from importance-
    weighted draws: ``P(T >= t) = mean_i w_i [T_i >= t]`` (:func:`binned_null`).

    Why weighted: the far tail a per-check level of ``1e-6`` asks about is made of
    windows that leave *several* bins empty or thin (each empty 10% bin adds
    ``0.1 ln(0.1 / EPSILON) = 0.69`` nats), events a plain bootstrap of a few thousand
    draws never sees, and the statistic there is a lattice over empty-bin patterns, so
    no smooth tail fitted to the top draws extrapolates it safely (the exponential fit
    put 4 of 10 empty bins at 30 rows 5x too low). Drawing windows from proposals that
    empty or thin chosen bins makes those events common; the weights ``w_i`` (the
    likelihood ratio, exact for multinomial windows) bring them back to their true
    probability, so the tail is estimated, not extrapolated.
    Beyond the largest draw: an exponential decay from its survival (rarely reached).
    """

    n: int
    draws: np.ndarray  # sorted ascending
    survival: np.ndarray  # survival[i] = P(T >= draws[i])
    tail_scale: float
    mean: float
    _critical: dict = field(default_factory=dict, compare=False, repr=False)

    def p_value(self, value: float) -> float:
        """``P(statistic >= value)`` under no drift."""
        index = int(np.searchsorted(self.draws, value, side="left"))
        if index < self.draws.size:
            return float(min(self.survival[index], 1.0))
        excess = value - float(self.draws[-1])
        return float(self.survival[-1] * math.exp(-excess / self.tail_scale))

    def critical_value(self, level: float) -> float:
        """The smallest value with ``p_value <= level`` (cached)."""
        if level in self._critical:
            return self._critical[level]
        low, high = 0.0, float(self.draws[-1])
        while self.p_value(high) > level:
            high = 2 * high + 1e-9
        for _ in range(60):
            middle = (low + high) / 2
            if self.p_value(middle) > level:
                low = middle
            else:
                high = middle
        critical = high
        self._critical[level] = critical
        return critical


def _component(values: np.ndarray, n: int) -> NullDistribution:
    values = np.sort(values)
    start, scale = _fit_tail(values)
    return NullDistribution(n=n, draws=values, tail_start=start, tail_scale=scale)


def _fit_tail(draws: np.ndarray) -> tuple[float, float]:
    b = draws.size
    tail_count = max(int(b * TAIL_SHARE), 20)
    start = float(draws[b - tail_count])
    excess = draws[b - tail_count :] - start
    scale = float(excess.mean())
    spread = float(draws[b - tail_count] - np.median(draws))
    return start, max(scale, spread / 10, 1e-12)


def binned_statistic(
    test: str, p_ref: np.ndarray, p_cur: np.ndarray, *, categorical: bool = False
) -> np.ndarray:
    """The binned statistic ``test`` of each row pair of proportions, as the engine
    computes it (:meth:`BinnedBootstrap.statistic`: the statistic's own formula)."""
    return _binned(test).statistic(p_ref, p_cur, categorical=categorical)


def _is_binned(null: NullModel | None) -> bool:
    # By what it can do rather than by class: stattests.binned.BinnedBootstrap imports
    # this module, so naming its class here would tie the two into an import cycle.
    return callable(getattr(null, "statistic", None))


def _binned(test: str):
    """The ``BinnedBootstrap`` null of ``test`` (its statistic's formula on proportions)."""
    null = get_stattest(test).null
    if not _is_binned(null):
        binned = [n for n, t in STATTESTS.items() if _is_binned(t.null)]
        raise ValueError(f"{test!r} is not a binned statistic; binned: {binned}")
    return null


def null_population(reference) -> tuple[np.ndarray, int]:
    """Bin probabilities of "no drift" and the reference's non-missing count.

    Numeric: the reference's bin shares. Categorical: the reference's levels first (in
    profile order), then the levels it is estimated to have missed (see
    :func:`_categorical_population`).
    """
    if isinstance(reference, NumericProfile):
        counts = reference.bin_counts.astype(float)
        total = counts.sum()
        return counts / total, round(total)
    assert isinstance(reference, CategoricalProfile)
    counts = np.array(list(reference.category_counts.values()), dtype=float)
    return _categorical_population(counts), round(counts.sum())


def _categorical_population(counts: np.ndarray) -> np.ndarray:
    """The population a categorical reference was drawn from, estimated from its counts.

    Chao et al.'s bootstrap assemblage (Chao & Jost 2012; Chao et al. 2014, the iNEXT
    bootstrap): the sample coverage ``C = 1 - f1/n * (n-1) f1 / ((n-1) f1 + 2 f2)``
    (Good-Turing, ``f_r`` levels seen ``r`` times); seen levels shrunk to
    ``x/n (1 - lam (1 - x/n)^n)`` so that they hold ``C``; and ``f0`` unseen levels
    (Chao1: ``(n-1)/n f1^2 / (2 f2)``) sharing ``1 - C`` equally. A reference sees
    rare levels *because* it drew them, so levels it saw once are on average rarer
    than ``1/n``, and many levels it never saw are there too: both are what a
    reference's own noise is made of once a window is larger than the reference (a
    null drawn from the reference's shares as if they were the truth, with the
    unseen mass as one ordinary bin, made KL 0.022 where no-drift windows of 100,000
    rows give 0.031 on an 800-level feature: 100% false alarms at a nominal 5%).
    """
    n = counts.sum()
    f1, f2 = float(np.sum(counts == 1)), float(np.sum(counts == 2))
    if n <= 1 or f1 == 0:
        return counts / n
    coverage = 1 - f1 / n * ((n - 1) * f1 / ((n - 1) * f1 + 2 * f2))
    f0 = (n - 1) / n * (f1**2 / (2 * f2) if f2 > 0 else f1 * (f1 - 1) / 2)
    unseen = min(max(math.ceil(f0), 1), MAX_UNSEEN_LEVELS)
    share = counts / n
    weight = np.sum(share * (1 - share) ** n)
    lam = (1 - coverage) / weight if weight > 0 else 0.0
    seen = share * (1 - lam * (1 - share) ** n)
    seen = np.clip(seen, 0.0, None)
    seen *= coverage / seen.sum()
    return np.concatenate([seen, np.full(unseen, (1 - coverage) / unseen)])


def conditional_null(
    test: str, ref_counts: np.ndarray, cur_counts: np.ndarray, draws: int = CONDITIONAL_DRAWS
) -> NullDistribution:
    """The no-drift distribution of ``test`` given this window's and the reference's
    counts per level: a permutation null. With no drift, reference and window rows are
    exchangeable, so the window is a random ``n``-subset of the pooled rows; its counts
    per level are multivariate hypergeometric and the reference keeps the rest. Exact
    whatever the population's rare tail (nothing is estimated), at the cost of a null
    per check (about 0.1 s for 800 levels) instead of a cached one per size. Seeded by
    the counts, so judging a window again gives the same p-value.
    """
    draw = _permutations(test, ref_counts, cur_counts)
    return _component(draw(draws), int(np.rint(cur_counts).sum()))


def _permutations(test: str, ref_counts: np.ndarray, cur_counts: np.ndarray):
    """``draw(k)``: the statistic on the next ``k`` permutations of :func:`conditional_null`
    (its seed; drawn in chunks, the same stream and values as in one call)."""
    ref, cur = np.rint(ref_counts).astype(np.int64), np.rint(cur_counts).astype(np.int64)
    pooled = ref + cur
    n, n_ref = int(cur.sum()), int(ref.sum())
    digest = hashlib.sha1(pooled.tobytes() + cur.tobytes())
    rng = np.random.default_rng(int.from_bytes(digest.digest()[:8], "little"))

    def draw(k: int) -> np.ndarray:
        current = rng.multivariate_hypergeometric(pooled, n, size=k)
        reference = pooled - current
        return binned_statistic(test, reference / n_ref, current / n, categorical=True)

    return draw


def conditional_breach(
    test: str,
    ref_counts: np.ndarray,
    cur_counts: np.ndarray,
    value: float,
    level: float,
    draws: int = CONDITIONAL_DRAWS,
) -> bool:
    """``conditional_null(...).p_value(value) <= level``, the same answer, sooner.

    The permutations are drawn in chunks, and drawing stops once ``value`` has been
    reached by enough of them that the p-value is over ``level`` whatever the rest
    show: more than the fitted tail's draws (so the p-value is the plain count) and
    ``(reached + 1) / (draws + 1) > level``. A window far from breaching (most
    no-drift windows) settles in a few hundred permutations instead of 2,000; one near
    or past the level draws them all. For what needs the decision only (the
    calibration benchmarks); the engine keeps the whole null (its mean is the
    window's bias correction)."""
    draw = _permutations(test, ref_counts, cur_counts)
    tail_count = max(int(draws * TAIL_SHARE), 20)
    values, reached = [], 0
    for start in range(0, draws, PERMUTATION_CHUNK):
        values.append(draw(min(PERMUTATION_CHUNK, draws - start)))
        reached += int(np.count_nonzero(values[-1] >= value))
        if reached >= tail_count and (reached + 1) / (draws + 1) > level:
            return False
    null = _component(np.concatenate(values), int(np.rint(cur_counts).sum()))
    return null.p_value(value) <= level


def grid_size(n: int) -> int:
    """The window size whose null stands in for ``n`` (exact up to 256, then a 3% grid
    rounded down: a smaller window's null is the wider, conservative one)."""
    if n <= EXACT_SIZES:
        return n
    steps = math.floor(math.log(n / EXACT_SIZES) / math.log(GRID_STEP))
    return max(EXACT_SIZES, int(EXACT_SIZES * GRID_STEP**steps))


def grid_scale(n: int, grid_n: int, n_ref: int) -> float:
    """Factor bringing a statistic at ``n`` rows to the scale of one at ``grid_n`` rows
    (its no-drift size goes as ``1/n + 1/n_ref``)."""
    return (1 / grid_n + 1 / n_ref) / (1 / n + 1 / n_ref) if n != grid_n else 1.0


def _proposals(p: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The importance proposals of :func:`binned_null`: ``p`` with a subset ``E`` of its
    ``TILTED_BINS`` heaviest bins scaled by ``factor`` (0: emptied; ``THIN_FACTOR``:
    thinned), then renormalised, for every ``E`` of 1 to ``MAX_TILTED`` bins. Only bins
    a window of ``n`` rows leaves that thin with probability ``NEGLIGIBLE`` or more
    (Chernoff: ``exp(-n p (1 - f + f ln f))``) are tilted: at large windows no bin is,
    and every draw is a plain one.

    Returns ``(subsets, factors, probs, tilted)``: the bins (indices into ``tilted``) of
    each proposal as a 0/1 matrix, its factor, its mixture probability (``PLAIN_SHARE``
    for ``p`` itself, the rest split equally over (size, factor), then over subsets),
    and the tilted bins. The heaviest bins because an empty or thin bin costs
    ``p_j ln(p_j / EPSILON)``: the far tail is made of them.
    """
    f = THIN_FACTOR
    thin_log_prob = -n * p * (1 - f + f * math.log(f))
    positive = np.flatnonzero((p > 0) & (thin_log_prob >= math.log(NEGLIGIBLE)))
    tilted = positive[np.argsort(-p[positive], kind="stable")][:TILTED_BINS]
    # Never every bin at once: an emptied proposal must keep some mass.
    sizes = range(1, min(MAX_TILTED, tilted.size, int(np.sum(p > 0)) - 1) + 1)
    groups = [(k, f) for k in sizes for f in (0.0, THIN_FACTOR)]
    plain = PLAIN_SHARE if groups else 1.0
    subsets, factors, probs = [np.zeros((1, tilted.size))], [[1.0]], [[plain]]
    for k, factor in groups:
        combos = np.array(list(itertools.combinations(range(tilted.size), k)))
        rows = np.zeros((len(combos), tilted.size))
        rows[np.arange(len(combos))[:, None], combos] = 1.0
        subsets.append(rows)
        factors.append(np.full(len(combos), factor))
        probs.append(np.full(len(combos), (1 - plain) / len(groups) / len(combos)))
    return np.concatenate(subsets), np.concatenate(factors), np.concatenate(probs), tilted


def _tilted_draws(p: np.ndarray, n: int, draws: int, rng) -> tuple[np.ndarray, np.ndarray]:
    """``draws`` windows of ``n`` rows from the proposal mixture, and their weights
    ``P_p(x) / sum_m pi_m P_m(x)`` (``<= 1 / PLAIN_SHARE``: the plain draws bound them).

    For a proposal ``m`` that scales the bins ``E`` by ``f`` (mass ``p_E`` moved),
    ``P_m(x) / P_p(x) = c^n f^(x_E)`` with ``c = 1 / (1 - (1 - f) p_E)``: only the
    tilted bins' counts enter (:func:`_mixture_ratio`).
    """
    subsets, factors, probs, tilted = _proposals(p, n)
    chosen = rng.choice(probs.size, size=draws, p=probs)
    q = np.broadcast_to(p, (draws, p.size)).copy()
    q[:, tilted] *= 1.0 - (1.0 - factors[chosen, None]) * subsets[chosen]
    q /= q.sum(axis=1, keepdims=True)
    counts = rng.multinomial(n, q)
    mixture = _mixture_ratio(counts[:, tilted], p[tilted], n, subsets, factors, probs)
    return counts, 1.0 / mixture


def _mixture_ratio(x, p_tilted, n, subsets, factors, probs) -> np.ndarray:
    """``sum_m pi_m P_m(x) / P_p(x)`` for each row of tilted counts ``x``.

    Written for speed without a ``draws x proposals`` matrix (1,275 proposals: that
    matrix, its logarithms and exponentials were most of a null's first build):

    * an emptied proposal (``f = 0``) weighs ``pi_m c_m^n`` if the window has no row in
      its bins, else nothing: a sum per pattern of empty tilted bins (at most 2^10),
      looked up per window;
    * the others (the plain draw, ``f = 1``, and the thinned, ``f < 1``) weigh
      ``pi_m c_m^n prod_(j in E) f^(x_j)``: the tilted bins split in two halves ``A``
      and ``B``, a product over ``E`` is one over ``E & A`` times one over ``E & B``, so
      the sum is ``sum_(a, b) P_A[a] C[a, b] P_B[b]``: two tables of at most 32 partial
      products per window and a 32 x 32 matrix of the proposals' constants.

    Overflow is harmless: ``c^n`` is bounded for the thinned proposals by which bins are
    tilted (``NEGLIGIBLE``), and an emptied one too large to represent gives the window
    weight 0 (its true weight is below ``1e-300``).
    """
    x = np.asarray(x, dtype=np.int64)
    bins = x.shape[1]
    mass = subsets @ p_tilted
    masks = (subsets.astype(np.int64) << np.arange(bins)).sum(axis=1)
    total = np.zeros(x.shape[0])
    with np.errstate(over="ignore", divide="ignore"):
        constant = probs * np.exp(-n * np.log1p(-(1.0 - factors) * mass))
        emptied = factors == 0
        if emptied.any():
            empty = ((x == 0).astype(np.int64) << np.arange(bins)).sum(axis=1)
            # by_pattern[P] = sum of the constants of the emptied proposals whose bins
            # are all in P: each constant at its mask, then a running sum along each
            # bit (the subset-sum transform; a loop over 637 masks took a third of a
            # 10-bin null's build).
            by_pattern = np.zeros(2**bins)
            np.add.at(by_pattern, masks[emptied], constant[emptied])
            lattice = by_pattern.reshape((2,) * bins)  # a view: bit j is an axis
            for axis in range(bins):
                np.cumsum(lattice, axis=axis, out=lattice)
            total += by_pattern[empty]
        half = bins // 2
        low_bits, high_bits = (1 << half) - 1, ((1 << bins) - 1) ^ ((1 << half) - 1)
        for factor in np.unique(factors[~emptied]):
            these = factors == factor
            if factor == 1.0:  # the plain draw: no bin scaled
                total += constant[these].sum()
                continue
            table = np.zeros((2**half, 2 ** (bins - half)))
            np.add.at(
                table, (masks[these] & low_bits, (masks[these] & high_bits) >> half),
                constant[these],
            )  # fmt: skip
            y = np.power(float(factor), x)  # f^(x_j) per window and tilted bin
            low = _subset_products(y[:, :half])
            high = _subset_products(y[:, half:])
            total += (np.einsum("ia,ab->ib", low, table) * high).sum(axis=1)  # no BLAS threads
    return total


def _subset_products(y: np.ndarray) -> np.ndarray:
    """``out[i, s] = prod_(j in s) y[i, j]`` for every subset ``s`` of the columns (bit
    ``j`` of ``s`` set: column ``j`` in it)."""
    out = np.ones((y.shape[0], 2 ** y.shape[1]))
    for j in range(y.shape[1]):
        width = 1 << j
        out[:, width : 2 * width] = out[:, :width] * y[:, j : j + 1]
    return out


def binned_null(test: str, reference, n: int, draws: int = NULL_DRAWS) -> WeightedNull:
    """The no-drift distribution of ``test`` on ``reference`` for windows of ``n`` rows:
    reference samples of the reference's size from the population, windows from the
    importance proposals of :func:`_tilted_draws` (the reference's noise is drawn the
    same way under both, so it needs no weight).

    Cached in memory, and on disk when the reference's profile was opened with
    :func:`keep_nulls_in` (read back, a fresh process does not build it again)."""
    p, n_ref = null_population(reference)
    categorical = isinstance(reference, CategoricalProfile)
    key = _null_key(test, p, n_ref, n, draws, categorical)
    cached = _cache.get(key)
    if cached is not None:
        _cache.move_to_end(key)
        return cached
    folder = _null_folders.get((key[1], n_ref, categorical))
    null = None if folder is None else _read_null(folder, test, key)
    if null is None:
        null = _build_binned_null(test, p, n_ref, n, draws, categorical, key)
        if folder is not None:
            _write_null(folder, test, key, null)
    _cache[key] = null
    if len(_cache) > _CACHE_SIZE:
        _cache.popitem(last=False)
    return null


def _null_key(test: str, p: np.ndarray, n_ref: int, n: int, draws: int, categorical: bool) -> tuple:
    """What a binned null depends on (and its seed): the statistic, the population's
    digest, the reference's and the window's sizes, the draws."""
    key = (test, hashlib.sha1(p.tobytes()).hexdigest(), n_ref, n, draws)
    if categorical:  # its own null (levels absent from both sides are no bins)
        key += ("categorical",)
    return key


def _build_binned_null(
    test: str, p: np.ndarray, n_ref: int, n: int, draws: int, categorical: bool, key: tuple
) -> WeightedNull:
    """What :func:`binned_null` computes on a cache miss (seeded by its key)."""
    seed = int.from_bytes(hashlib.sha1(repr(key).encode()).digest()[:8], "little")
    rng = np.random.default_rng(seed)
    scale_ref = max(n_ref, 1)
    ref = rng.multinomial(scale_ref, p, size=draws) / scale_ref
    counts, weights = _tilted_draws(p, n, draws, rng)
    values = binned_statistic(test, ref, counts / n, categorical=categorical)
    order = np.argsort(values, kind="stable")
    values, weights = values[order], weights[order]
    survival = np.cumsum(weights[::-1])[::-1] / draws
    mean = float(np.sum(weights * values) / np.sum(weights))
    spread = float(np.sqrt(np.sum(weights * (values - mean) ** 2) / np.sum(weights)))
    return WeightedNull(
        n=n, draws=values, survival=survival, tail_scale=max(spread, 1e-12), mean=mean
    )


# -- the binned nulls on disk, next to the profile they were built from --------------
# (population digest, reference size, categorical) -> folder: filled by keep_nulls_in.
_null_folders: dict[tuple[str, int, bool], Path] = {}


def keep_nulls_in(profile, folder: str | Path) -> None:
    """Keep the binned nulls of ``profile``'s features (a ``ReferenceProfile``) in
    ``folder``: each null built for one of them is written there, and read from there
    by any later process instead of being built again (0.03-0.9 s per feature and
    window size, against about a millisecond to read).

    Safe to share: a file is named and checked by everything the null depends on (the
    statistic, the population's digest and the reference's size, the window's size, the
    draws, and a fingerprint of the code that builds it and of numpy's version), so a
    different profile, size or build never reuses it; a file that does not match or
    does not load is built again. Plain arrays (``.npz``), read with ``allow_pickle=False``.
    """
    for feature in profile.features.values():
        if isinstance(feature, NumericProfile | CategoricalProfile):
            p, n_ref = null_population(feature)
            digest = hashlib.sha1(p.tobytes()).hexdigest()
            categorical = isinstance(feature, CategoricalProfile)
            _null_folders[(digest, n_ref, categorical)] = Path(folder)


@functools.cache
def _code_fingerprint(test: str) -> str:
    """A digest of the code a binned null of ``test`` is built by: this module, the
    binned statistics' module, the statistic's own module, numpy's version (its
    generators' streams)."""
    rows = getattr(_binned(test), "rows", None)
    modules = {__name__, "driftgate.monitors.stattests.binned", getattr(rows, "__module__", "")}
    digest = hashlib.sha1(np.__version__.encode())
    for name in sorted(modules):
        module = sys.modules.get(name)
        source = getattr(module, "__file__", None)
        digest.update(name.encode())
        digest.update(
            Path(source).read_bytes() if source else getattr(rows, "__qualname__", "?").encode()
        )
    return digest.hexdigest()


def _null_file(folder: Path, test: str, key: tuple) -> tuple[Path, str]:
    identity = repr((key, _code_fingerprint(test)))
    name = hashlib.sha256(identity.encode()).hexdigest()[:32]
    return folder / f"{test}-n{key[3]}-{name}.npz", identity


def _read_null(folder: Path, test: str, key: tuple) -> WeightedNull | None:
    path, identity = _null_file(folder, test, key)
    try:
        with np.load(path, allow_pickle=False) as stored:
            if str(stored["identity"]) != identity:
                return None
            return WeightedNull(
                n=int(stored["n"]),
                draws=stored["draws"],
                survival=stored["survival"],
                tail_scale=float(stored["tail_scale"]),
                mean=float(stored["mean"]),
            )
    except (OSError, KeyError, ValueError):  # absent, unreadable, another format
        return None


def _write_null(folder: Path, test: str, key: tuple, null: WeightedNull) -> None:
    path, identity = _null_file(folder, test, key)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        scratch = folder / f".{path.name}.{os.getpid()}.tmp"
        with scratch.open("wb") as out:
            np.savez(
                out, identity=np.array(identity), n=np.array(null.n), draws=null.draws,
                survival=null.survival, tail_scale=np.array(null.tail_scale),
                mean=np.array(null.mean),
            )  # fmt: skip
        os.replace(scratch, path)  # whole or not at all, for a concurrent reader
    except OSError as exc:  # a read-only home: the null is rebuilt next time
        log.debug("binned null not kept in %s: %s", folder, exc)


def most_extreme_binned(test: str, reference, n: int) -> float:
    """The largest value a window of ``n`` rows can take: every row in one bin."""
    categorical = isinstance(reference, CategoricalProfile)
    if categorical:  # the engine's reference bins: the levels the reference saw
        p = np.array(list(reference.category_counts.values()), dtype=float)
        p /= p.sum()
    else:
        p, _ = null_population(reference)
    k = p.size
    # Each candidate window puts all its rows in one bin, or in one new (unseen) bin.
    ref = np.vstack([np.concatenate([p, [0.0]])] * (k + 1))
    cur = np.eye(k + 1)
    if isinstance(reference, NumericProfile):
        ref, cur = ref[:k, :k], cur[:k, :k]
    return float(binned_statistic(test, ref, cur, categorical=categorical).max())


def decision_bound(test: str, reference, n: int, threshold: float, level: float) -> Bound:
    """The smallest value a window of ``n`` rows can breach with, from the profile alone
    (the planner and the calibration benchmark use it; the statistic's
    ``NullModel.calibrate`` is the same decision on one window)."""
    stat = get_stattest(test)
    bound = None if stat.null is None else stat.null.bound(test, reference, n, threshold, level)
    if bound is None:
        bounded = [
            name
            for name, t in STATTESTS.items()
            if t.null is not None and type(t.null).bound is not NullModel.bound
        ]
        raise ValueError(f"no profile-only bound for {test!r}; bounded: {bounded}")
    return bound


def clear_cache() -> None:
    """Forget the cached null distributions and where they are kept on disk (tests)."""
    _cache.clear()
    _null_folders.clear()
