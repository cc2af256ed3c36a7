"""Drift statistics, one module per test, registered by name on import.

>>> from monitors.stattests import get_stattest
>>> get_stattest("psi").direction
'distance'
"""

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
    InsufficientData,
    StatTest,
    TestOutcome,
    UnknownStatTestError,
    get_stattest,
    register,
)

__all__ = [
    "STATTESTS",
    "InsufficientData",
    "StatTest",
    "TestOutcome",
    "UnknownStatTestError",
    "get_stattest",
    "register",
]
