"""The registry: every test declared, unknown names listed."""

from __future__ import annotations

import pytest

from driftgate.monitors.stattests import STATTESTS, UnknownStatTestError, get_stattest

NAMES = {"ks", "kl", "psi", "js", "wasserstein", "chi2", "missing_share", "mean_shift"}


def test_every_required_test_is_registered_with_direction_and_units():
    assert set(STATTESTS) == NAMES
    for test in STATTESTS.values():
        assert test.direction in ("p_value", "distance")
        assert test.units
        assert set(test.feature_types) <= {"numeric", "categorical"}
        assert test.func.__doc__ and test.func.__module__
        if test.direction == "p_value":
            assert test.effect_size and test.default_effect_size_floor is not None


def test_directions():
    assert get_stattest("ks").direction == "p_value"
    assert get_stattest("chi2").direction == "p_value"
    assert get_stattest("kl").direction == "distance"
    assert get_stattest("missing_share").direction == "distance"


def test_unknown_name_lists_the_known_ones():
    with pytest.raises(UnknownStatTestError) as info:
        get_stattest("kolmogorov")
    message = str(info.value)
    assert "'kolmogorov'" in message
    for name in NAMES:
        assert name in message


def test_every_module_of_the_package_is_imported_so_a_new_statistic_needs_no_other_edit():
    """A statistic is one new module: the package imports every module it holds."""
    import sys
    from pathlib import Path

    import driftgate.monitors.stattests as package

    modules = {path.stem for path in Path(package.__file__).parent.glob("*.py")} - {"__init__"}
    assert modules >= NAMES  # one module per statistic
    missing = [m for m in sorted(modules) if f"{package.__name__}.{m}" not in sys.modules]
    assert not missing, f"not imported by the package: {missing}"


def test_every_statistic_carries_its_effect_size_and_categorical_ones_the_levels_that_moved():
    """Issue 30: the evidence carried an effect size for ks and chi2 only, and no level."""
    import numpy as np

    from tests.monitors.conftest import run

    rng = np.random.default_rng(30)
    data = {
        "numeric": (rng.normal(size=800), rng.normal(0.5, 1.0, size=300)),
        "categorical": (  # b keeps its share of 0.3 exactly
            np.repeat(list("abc"), [400, 240, 160]),
            np.repeat(list("abc"), [60, 90, 150]),
        ),
    }
    for test in STATTESTS.values():
        assert test.effect_size, test.name
        for kind in test.feature_types:
            outcome = run(test.func, *data[kind], kind)
            assert outcome.effect_size is not None, (test.name, kind)
            nothing_missing = test.name == "missing_share"  # on either side: a change of 0
            assert outcome.effect_size > 0 or nothing_missing, (test.name, kind)
            if kind == "categorical" and test.name != "missing_share":
                moved = outcome.details["moved"]
                assert [m["level"] for m in moved] == ["a", "c"], test.name  # b did not move
                assert moved[0]["reference"] > moved[0]["current"]
    assert get_stattest("chi2").evidence is not None  # Cramér's V on every window
