"""KL, PSI and JS: textbook values on hand-computed bins, smoothing, bounds."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats
from scipy.spatial import distance

from driftgate.monitors.stattests.binned import EPSILON, bin_counts, smooth
from driftgate.monitors.stattests.js import js_test
from driftgate.monitors.stattests.kl import kl_test
from driftgate.monitors.stattests.psi import psi_test
from tests.monitors.conftest import fit, run, window_of

# Reference a:2 b:1 c:1 (0.5, 0.25, 0.25); current a:1 b:1 c:2 (0.25, 0.25, 0.5).
REFERENCE = ["a", "a", "b", "c"]
CURRENT = ["a", "b", "c", "c"]


def test_kl_hand_computed():
    expected = 0.5 * math.log(0.5 / 0.25) + 0.25 * math.log(1) + 0.25 * math.log(0.25 / 0.5)
    outcome = run(kl_test, REFERENCE, CURRENT, "categorical")
    assert outcome.value == pytest.approx(expected, rel=1e-12)
    assert outcome.value == pytest.approx(0.25 * math.log(2), rel=1e-12)


def test_psi_hand_computed():
    expected = (0.25 - 0.5) * math.log(0.25 / 0.5) + (0.5 - 0.25) * math.log(0.5 / 0.25)
    outcome = run(psi_test, REFERENCE, CURRENT, "categorical")
    assert outcome.value == pytest.approx(expected, rel=1e-12)
    assert outcome.value == pytest.approx(0.5 * math.log(2), rel=1e-12)


def test_js_hand_computed_base_2():
    p, q = np.array([0.5, 0.25, 0.25]), np.array([0.25, 0.25, 0.5])
    m = (p + q) / 2
    divergence = 0.5 * np.sum(p * np.log2(p / m)) + 0.5 * np.sum(q * np.log2(q / m))
    outcome = run(js_test, REFERENCE, CURRENT, "categorical")
    assert outcome.value == pytest.approx(math.sqrt(divergence), rel=1e-12)
    assert outcome.value == pytest.approx(distance.jensenshannon(p, q, base=2), rel=1e-12)


def test_js_of_disjoint_supports_is_one():
    assert run(js_test, ["a", "a"], ["b"], "categorical").value == pytest.approx(1.0)


def test_unseen_category_is_smoothed_then_renormalised():
    # Reference a, b (0.5 each); current adds unseen c: reference gets EPSILON there.
    outcome = run(kl_test, ["a", "b"], ["a", "b", "c", "c"], "categorical")
    p_ref = np.array([0.5, 0.5, EPSILON]) / (1 + EPSILON)
    p_cur = np.array([0.25, 0.25, 0.5])
    assert outcome.value == pytest.approx(stats.entropy(p_ref, p_cur), rel=1e-12)
    assert np.isfinite(run(psi_test, ["a", "b"], ["a", "b", "c"], "categorical").value)


def test_smooth_leaves_full_vectors_alone():
    p = np.array([0.2, 0.8])
    assert smooth(p) is p
    assert smooth(np.array([0.0, 1.0])).sum() == pytest.approx(1.0)


def test_numeric_bins_are_reference_quantiles_with_open_outer_bins(rng):
    reference = rng.normal(size=1000)
    profile = fit(reference, n_bins=4)
    feature = profile.features["x"]
    assert feature.bin_edges == pytest.approx(np.quantile(reference, [0.25, 0.5, 0.75]))
    assert feature.bin_counts.tolist() == [250, 250, 250, 250]
    # Values far outside the reference, infinite ones included, land in the outer bins.
    window = window_of(profile, [-1e9, -np.inf, 1e9, np.inf, np.nan])
    _, cur_counts, labels = bin_counts(feature, window)
    assert cur_counts.tolist() == [2, 0, 0, 2]
    assert labels[0].startswith("<") and labels[-1].startswith(">=")


def test_numeric_psi_hand_computed():
    # Edges at the reference median 2.5: bins (-inf, 2.5) and [2.5, inf).
    reference, current = [1.0, 2.0, 3.0, 4.0], [1.0, 3.0, 3.0, 4.0]
    outcome = run(psi_test, reference, current, n_bins=2)
    expected = (0.25 - 0.5) * math.log(0.25 / 0.5) + (0.75 - 0.5) * math.log(0.75 / 0.5)
    assert outcome.value == pytest.approx(expected, rel=1e-12)


categories = st.lists(st.sampled_from("abcdef"), min_size=1, max_size=80)


@settings(max_examples=80, deadline=None)
@given(reference=categories, current=categories)
def test_property_bounds(reference, current):
    kl = run(kl_test, reference, current, "categorical").value
    psi = run(psi_test, reference, current, "categorical").value
    js = run(js_test, reference, current, "categorical").value
    assert kl >= -1e-12
    assert psi >= -1e-12
    assert 0.0 <= js <= 1.0


@settings(max_examples=50, deadline=None)
@given(values=categories)
def test_property_identical_data_gives_zero(values):
    for test in (kl_test, psi_test, js_test):
        assert run(test, values, values, "categorical").value == pytest.approx(0.0, abs=1e-12)
