"""Which breaches the drift check judges again without their top client: the statistic
says so (``StatTest.counts_per_client``), the drift check names no statistic (issue 27).

The whole check on real clients over HTTP is tests/serving/test_client_concentration.py.
"""

from __future__ import annotations

import dataclasses

from driftgate.jobs.drift_check import concentration_suspects
from driftgate.monitors.results import MonitorResult
from driftgate.monitors.stattests import get_stattest, register, unregister


def breach(monitor: str, metric: str, action: str = "pause_inference", **changes):
    result = MonitorResult(
        monitor=monitor, metric=metric, action=action, threshold=0.05, breached=True,
        observed=0.2, breached_features=["temperature"],
    )  # fmt: skip
    return dataclasses.replace(result, **changes)


def test_only_pausing_breaches_of_a_statistic_counted_per_client_are_suspects():
    assert get_stattest("missing_share").counts_per_client
    assert not get_stattest("ks").counts_per_client
    results = [
        breach("missing", "missing_share"),
        breach("missing-reviewed", "missing_share", action="open_review"),
        breach("missing-ok", "missing_share", breached=False),
        breach("shift", "ks"),
        breach("accuracy", "performance:accuracy"),  # not a statistic at all
    ]
    assert [r.monitor for r in concentration_suspects(results)] == ["missing"]


def test_a_new_statistic_counted_per_client_is_checked_without_editing_the_drift_check():
    missing_share = get_stattest("missing_share")
    register(
        dataclasses.replace(
            missing_share, name="toy_missing_rise", evidence=None, counts_per_client=True
        )
    )
    try:
        suspects = concentration_suspects([breach("toy", "toy_missing_rise")])
    finally:
        unregister("toy_missing_rise")
    assert [r.monitor for r in suspects] == ["toy"]
