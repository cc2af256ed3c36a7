"""missing_share and mean_shift: hand-computed values and edge cases."""

from __future__ import annotations

import numpy as np
import pytest

from driftgate.monitors.stattests.mean_shift import mean_shift_test
from driftgate.monitors.stattests.missing_share import missing_share_test
from driftgate.monitors.stattests.registry import InsufficientData
from tests.monitors.conftest import run


def test_missing_share_is_the_absolute_change():
    outcome = run(missing_share_test, [1.0, np.nan, 3.0, 4.0], [np.nan, np.nan, 1.0, 2.0])
    assert outcome.value == pytest.approx(0.25)
    assert outcome.details["change"] == pytest.approx(0.25)
    falling = run(missing_share_test, [np.nan, np.nan], [1.0, np.nan])
    assert falling.value == pytest.approx(0.5)
    assert falling.details["change"] == pytest.approx(-0.5)


def test_missing_share_counts_none_in_categoricals():
    outcome = run(missing_share_test, ["a", "b"], ["a", None, None, "b"], "categorical")
    assert outcome.value == pytest.approx(0.5)


def test_missing_share_of_all_nan_window_is_one():
    assert run(missing_share_test, [1.0, 2.0], [np.nan] * 3).value == 1.0


def test_mean_shift_in_reference_standard_deviations():
    # Reference [0, 2]: mean 1, population std 1; current mean 2.5 -> 1.5 std.
    outcome = run(mean_shift_test, [0.0, 2.0], [2.0, 3.0])
    assert outcome.value == pytest.approx(1.5)
    assert run(mean_shift_test, [0.0, 2.0], [-0.5]).details["shift"] == pytest.approx(-1.5)


def test_mean_shift_ignores_infinities_and_needs_finite_values():
    assert run(mean_shift_test, [0.0, 2.0], [1.0, np.inf]).value == pytest.approx(0.0)
    with pytest.raises(InsufficientData):
        run(mean_shift_test, [0.0, 2.0], [np.inf, np.nan])
