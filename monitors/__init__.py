"""Drift monitoring: fitted reference profiles, a registry of drift statistics, checks.

Plain numpy / pandas (scipy where a size needs it); no Prefect, no MLflow.

>>> from monitors import ReferenceProfile, check_drift
>>> profile = ReferenceProfile.fit(train_df)                  # doctest: +SKIP
>>> report = check_drift(profile, window_df, correction="bh")  # doctest: +SKIP
>>> report.dataset_drifted, report.share_drifted               # doctest: +SKIP

The names below are imported from their modules on first use (PEP 562), not when the
package is: importing any submodule imports this file first, and ``monitors.drift``
brings the statistics and pandas with it, which ``monitors.durations``, ``budget``,
``results`` and the CLI's option parsing do not use. No module here imports scipy at
import time: the statistics import it when a size needs it
(:mod:`monitors.stattests.distributions`; issue 32: ``scipy.stats`` was 0.6 s of a fresh
process).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

# Public name -> the module that defines it.
_EXPORTS = {
    "CORRECTIONS": "driftgate.monitors.drift",
    "DEFAULT_TESTS": "driftgate.monitors.drift",
    "DriftConfigError": "driftgate.monitors.drift",
    "DriftReport": "driftgate.monitors.drift",
    "DriftResult": "driftgate.monitors.drift",
    "FeatureInfo": "driftgate.monitors.drift",
    "adjust_p_values": "driftgate.monitors.drift",
    "check_drift": "driftgate.monitors.drift",
    "check_drift_counts": "driftgate.monitors.drift",
    "ProfileError": "driftgate.monitors.profile",
    "ReferenceProfile": "driftgate.monitors.profile",
    "STATTESTS": "driftgate.monitors.stattests",
    "StatTest": "driftgate.monitors.stattests",
    "UnknownStatTestError": "driftgate.monitors.stattests",
    "get_stattest": "driftgate.monitors.stattests",
    "MissingColumnError": "driftgate.monitors.window",
}

__all__ = sorted(_EXPORTS)

if TYPE_CHECKING:  # for type checkers and editors: the same names, eagerly
    from driftgate.monitors.drift import (  # noqa: F401
        CORRECTIONS,
        DEFAULT_TESTS,
        DriftConfigError,
        DriftReport,
        DriftResult,
        FeatureInfo,
        adjust_p_values,
        check_drift,
        check_drift_counts,
    )
    from driftgate.monitors.profile import ProfileError, ReferenceProfile  # noqa: F401
    from driftgate.monitors.stattests import (  # noqa: F401
        STATTESTS,
        StatTest,
        UnknownStatTestError,
        get_stattest,
    )
    from driftgate.monitors.window import MissingColumnError  # noqa: F401


def __getattr__(name: str):
    module = _EXPORTS.get(name)
    if module is None:
        # An AttributeError (not ImportError) lets `from driftgate.monitors import x`
        # go on to import a submodule called x.
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # once: later lookups do not come here
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS})
