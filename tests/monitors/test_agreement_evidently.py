"""Agreement with Evidently 0.7 where the same test and binning exist.

Evidently's stat-test functions are called directly (the full report is slow).
Deliberate differences, documented in docs/monitors.md:

* numeric KL / PSI / JS: Evidently bins reference + current combined (Sturges) when a
  column has more than 20 distinct values; driftgate uses the reference's quantile bins
  fixed at fit time, so values differ by design and are not compared here;
* JS: Evidently uses the natural logarithm, driftgate base 2 (factor sqrt(ln 2));
* empty bins: Evidently sets them to 1e-4 (or min/1e6) without renormalising PSI;
  driftgate sets them to 1e-4 and renormalises; equal when no bin is empty;
* chi2: Evidently runs goodness of fit against reference proportions, driftgate a
  2 x K homogeneity test (compared with scipy in stattests/test_chi2.py instead);
* normalised Wasserstein: Evidently divides by max(std, 0.001), driftgate by std
  (0 -> 0 or inf).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from evidently.legacy.calculations.stattests import (
    jensenshannon_stat_test,
    kl_div_stat_test,
    ks_stat_test,
    psi_stat_test,
    wasserstein_stat_test,
)
from evidently.legacy.core import ColumnType

from driftgate.monitors.stattests.js import js_test
from driftgate.monitors.stattests.kl import kl_test
from driftgate.monitors.stattests.ks import ks_test
from driftgate.monitors.stattests.psi import psi_test
from driftgate.monitors.stattests.wasserstein import wasserstein_test
from tests.monitors.conftest import run


def evidently_score(stattest, reference, current, column_type) -> float:
    result = stattest(pd.Series(reference), pd.Series(current), column_type, None)
    return float(result.drift_score)


def test_ks_p_value_equals_evidently(rng):
    reference, current = rng.normal(size=3000), rng.normal(0.08, 1, 2500)
    ours = run(ks_test, reference, current)
    theirs = evidently_score(ks_stat_test, reference, current, ColumnType.Numerical)
    assert ours.p_value == pytest.approx(theirs, rel=1e-9)


def test_categorical_kl_psi_js_equal_evidently_without_empty_bins(rng):
    reference = rng.choice(list("abcde"), 4000, p=[0.3, 0.25, 0.2, 0.15, 0.1])
    current = rng.choice(list("abcde"), 3000, p=[0.2, 0.2, 0.2, 0.2, 0.2])
    kind = ColumnType.Categorical
    kl = evidently_score(kl_div_stat_test, reference, current, kind)
    psi = evidently_score(psi_stat_test, reference, current, kind)
    js = evidently_score(jensenshannon_stat_test, reference, current, kind)
    assert run(kl_test, reference, current, "categorical").value == pytest.approx(kl, rel=1e-12)
    assert run(psi_test, reference, current, "categorical").value == pytest.approx(psi, rel=1e-12)
    ours_js = run(js_test, reference, current, "categorical").value
    assert ours_js * math.sqrt(math.log(2)) == pytest.approx(js, rel=1e-9)


def test_unseen_category_smoothing_differs_by_less_than_a_percent(rng):
    reference = rng.choice(list("abc"), 5000)
    current = np.concatenate([rng.choice(list("abc"), 2990), ["z"] * 10])
    theirs = evidently_score(psi_stat_test, reference, current, ColumnType.Categorical)
    ours = run(psi_test, reference, current, "categorical").value
    assert ours == pytest.approx(theirs, rel=1e-2)


def test_normed_wasserstein_equals_evidently_on_discrete_values(rng):
    reference = rng.integers(0, 30, 5000).astype(float)
    current = rng.integers(2, 30, 4000).astype(float)
    theirs = evidently_score(wasserstein_stat_test, reference, current, ColumnType.Numerical)
    assert run(wasserstein_test, reference, current).value == pytest.approx(theirs, rel=1e-9)


def test_normed_wasserstein_close_to_evidently_on_continuous_values(rng):
    reference, current = rng.normal(size=5000), rng.normal(0.2, 1, 4000)
    theirs = evidently_score(wasserstein_stat_test, reference, current, ColumnType.Numerical)
    ours = run(wasserstein_test, reference, current)
    assert abs(ours.value - theirs) <= ours.details["error_bound"] + 1e-12
