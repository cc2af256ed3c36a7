"""Drift monitoring: fitted reference profiles, a registry of drift statistics, checks.

Plain numpy / scipy / pandas; no Prefect, no MLflow.

>>> from monitors import ReferenceProfile, check_drift
>>> profile = ReferenceProfile.fit(train_df)                  # doctest: +SKIP
>>> report = check_drift(profile, window_df, correction="bh")  # doctest: +SKIP
>>> report.dataset_drifted, report.share_drifted               # doctest: +SKIP
"""

from driftgate.monitors.drift import (
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
from driftgate.monitors.profile import ProfileError, ReferenceProfile
from driftgate.monitors.stattests import STATTESTS, StatTest, UnknownStatTestError, get_stattest
from driftgate.monitors.window import MissingColumnError

__all__ = [
    "CORRECTIONS",
    "DEFAULT_TESTS",
    "STATTESTS",
    "DriftConfigError",
    "DriftReport",
    "DriftResult",
    "FeatureInfo",
    "MissingColumnError",
    "ProfileError",
    "ReferenceProfile",
    "StatTest",
    "UnknownStatTestError",
    "adjust_p_values",
    "check_drift",
    "check_drift_counts",
    "get_stattest",
]
