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
