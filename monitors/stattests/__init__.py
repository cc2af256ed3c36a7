"""Drift statistics, one module per test, registered by name on import.

Every module of this package is imported here (discovered, not listed), so adding a
statistic is one new module plus its test. The built-in ones are imported first, in
this order, so that the registry lists them as before.

>>> from driftgate.monitors.stattests import get_stattest
>>> get_stattest("psi").direction
'distance'
"""

import importlib
import pkgutil

from driftgate.monitors.stattests import (  # noqa: F401 - importing registers each test
    chi2,
    js,
    kl,
    ks,
    mean_shift,
    missing_share,
    psi,
    wasserstein,
)
from driftgate.monitors.stattests.registry import (
    STATTESTS,
    Bound,
    Calibration,
    InsufficientData,
    NullModel,
    OwnPValue,
    StatTest,
    TestOutcome,
    UnknownStatTestError,
    evidence_tests,
    get_stattest,
    register,
    unregister,
)

for _module in pkgutil.iter_modules(__path__):
    importlib.import_module(f"{__name__}.{_module.name}")

__all__ = [
    "STATTESTS",
    "Bound",
    "Calibration",
    "InsufficientData",
    "NullModel",
    "OwnPValue",
    "StatTest",
    "TestOutcome",
    "UnknownStatTestError",
    "evidence_tests",
    "get_stattest",
    "register",
    "unregister",
]
