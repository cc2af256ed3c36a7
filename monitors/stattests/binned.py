"""Binned proportions shared by ``kl``, ``psi`` and ``js``.

Numeric features use the profile's bins: inner edges at reference quantiles and open
outer bins, so every current value, infinite ones included, falls in some bin. NaN is
not a bin: it is counted by ``missing_share``. Categorical features use one bin per
category seen in the reference or the current window (reference order first, then
unseen categories sorted), so an unseen category is a bin with reference count 0.

Smoothing for ``kl`` and ``psi``: empty bins get proportion ``EPSILON`` and the
vector is renormalised to sum to 1. With no empty bin the proportions are the raw
ones (which is also what Evidently uses in that case).
"""

from __future__ import annotations

import itertools

import numpy as np

from driftgate.monitors.profile import CategoricalProfile, FeatureProfile, NumericProfile
from driftgate.monitors.stattests.registry import InsufficientData

EPSILON = 1e-4


def bin_counts(reference: FeatureProfile, current) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """Reference and current counts per bin, and the bin labels."""
    if isinstance(reference, NumericProfile):
        edges = reference.bin_edges
        labels = [f"< {edges[0]:.6g}"] if edges.size else ["all"]
        labels += [f"[{a:.6g}, {b:.6g})" for a, b in itertools.pairwise(edges)]
        labels += [f">= {edges[-1]:.6g}"] if edges.size else []
        return reference.bin_counts.astype(float), current.bin_counts.astype(float), labels
    assert isinstance(reference, CategoricalProfile)
    labels = list(reference.category_counts)
    known = set(labels)
    labels += sorted(k for k in current.category_counts if k not in known)
    ref = np.array([reference.category_counts.get(k, 0) for k in labels], dtype=float)
    cur = np.array([current.category_counts.get(k, 0) for k in labels], dtype=float)
    return ref, cur, labels


def proportions(reference: FeatureProfile, current) -> tuple[np.ndarray, np.ndarray]:
    """Raw reference and current proportions per bin.

    Raises:
        InsufficientData: Either side has no non-missing value.
    """
    ref, cur, _ = bin_counts(reference, current)
    if ref.sum() == 0:
        raise InsufficientData("the reference has no non-missing values")
    if cur.sum() == 0:
        raise InsufficientData("the current window has no non-missing values")
    return ref / ref.sum(), cur / cur.sum()


def smooth(p: np.ndarray) -> np.ndarray:
    """Empty bins set to ``EPSILON``, then renormalised to sum to 1."""
    if not (p == 0).any():
        return p
    smoothed = np.where(p == 0, EPSILON, p)
    return smoothed / smoothed.sum()
