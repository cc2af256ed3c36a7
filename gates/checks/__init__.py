"""Gate checks, one module per check, registered by name on import.

Importing this package imports every module in it: the built-in checks first, in the
order the gate report lists them, then any other module alphabetically. So a new
check is one new module here (plus its test); no other file changes.

>>> from driftgate.gates.checks import get_check
>>> get_check("latency").needs
('predict', 'rows')
"""

from __future__ import annotations

import importlib
import pkgutil

from driftgate.gates.checks.registry import (
    CHECKS,
    NOT_GIVEN,
    CheckSettings,
    GateCheck,
    GateInputs,
    NotApplicable,
    UnknownCheckError,
    configurable_checks,
    get_check,
    register,
    run_checks,
    unregister,
    validate_check_settings,
)

# The report's order (data checks first, then model checks); modules not listed here
# run after these, in the alphabetical order of their module names.
BUILT_IN = (
    "data_contract",
    "data_version",
    "output_shape",
    "finite_outputs",
    "signature",
    "degenerate_output",
    "latency",
    "memory",
    "reload_parity",
    "export_parity",
    "registry_parity",
    "overfitting",
    "environment",
)


def import_check_modules(package: str, first: tuple[str, ...] = ()) -> list[str]:
    """Import every public module of ``package`` (``first`` in that order, then the rest
    alphabetically), which registers the checks they define; returns the module names."""
    found = {
        info.name
        for info in pkgutil.iter_modules(importlib.import_module(package).__path__)
        if not info.name.startswith("_") and info.name != "registry"
    }
    ordered = [name for name in first if name in found] + sorted(found - set(first))
    for name in ordered:
        importlib.import_module(f"{package}.{name}")
    return ordered


import_check_modules(__name__, BUILT_IN)

__all__ = [
    "BUILT_IN",
    "CHECKS",
    "NOT_GIVEN",
    "CheckSettings",
    "GateCheck",
    "GateInputs",
    "NotApplicable",
    "UnknownCheckError",
    "configurable_checks",
    "get_check",
    "import_check_modules",
    "register",
    "run_checks",
    "unregister",
    "validate_check_settings",
]
