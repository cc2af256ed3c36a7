"""A replay of a year of production in seconds retrains again after the configured
cooldown, counted in event time (issue 29): replaying a year of housing data in an
hour, a 30-day cooldown counted on the clock blocked every retrain after the first,
although four later months breached.

Real drift check (``judge_window``: read, contract, drift statistics, decision,
review, the ``retrain`` action and the retrain store's claim) on a real SQLite sample
store and the session's registered model. What a retrain trains and how the gate
judges it is tested in ``test_retrain_job.py``; here the launcher ends each claimed
retrain with a gated outcome at once (as :func:`driftgate.jobs.retrain.record_outcome`
does, without training), so what is measured is which breaches the claim lets
retrain.
"""

from __future__ import annotations

import pandas as pd
import pytest

from driftgate import registry
from driftgate.gates.config import load_gate_config
from driftgate.jobs import drift_check as job
from driftgate.monitors.rules import Monitor
from driftgate.stores.factories import retrain_store
from driftgate.stores.retrains import DONE, Retrain
from driftgate.stores.samples import SqlSampleStore
from tests.conftest import mlflow_client, retrains
from tests.driftgate.test_drift_check_job import write_window

# Four windows of 91 days: a year, 2033, judged back to back.
WINDOWS = [
    (start, start + pd.Timedelta(days=91))
    for start in pd.date_range("2033-01-01", periods=4, freq="91D", tz="UTC")
]
ROWS = 400


def judged_without_training(config, retrain: Retrain) -> Retrain:
    """A launcher standing in for train + gate: the candidate judged, not promoted."""
    store = retrain_store(config)
    try:
        return store.finish(
            retrain.id, run_id="-", candidate_version=retrain.champion_version, passed=False,
            promoted=False, gate_report="-", detail="judged without training (replay test)",
        )  # fmt: skip
    finally:
        store.close()


@pytest.fixture
def replay(trained_model, tmp_path):
    """The session's model as champion, with its own home and stores; four windows of
    2033, each of 400 records of the 1990s (they breach mean-shift-kl)."""
    config = trained_model.config.model_copy(deep=True)
    config.home = str(tmp_path / "home")
    config.serving = config.serving.model_copy(
        update={
            "sample_store_url": f"sqlite:///{tmp_path / 'samples.db'}",
            "control_store_url": f"sqlite:///{tmp_path / 'control.db'}",
        }
    )
    version = trained_model.outcome.registered.version
    mlflow_client(config.tracking.uri).set_registered_model_alias(
        config.model.name, registry.CHAMPION_ALIAS, version
    )
    data, features = trained_model.data, trained_model.data.features
    late = data.splits.production[data.splits.production["date"].dt.year >= 1990]
    store = SqlSampleStore(config.serving.sample_store(config.home_dir))
    for index, (start, end) in enumerate(WINDOWS):
        rows = late.iloc[index * ROWS : (index + 1) * ROWS]
        write_window(store, rows, features, (start.isoformat(), end.isoformat()), version)
    store.close()
    return config


def monitor_with(retrain_settings: dict) -> Monitor:
    kl = next(m for m in load_gate_config().monitors if m.name == "mean-shift-kl")
    return Monitor(**{**kl.model_dump(), "action": "retrain", "retrain": retrain_settings})


def test_a_replayed_year_retrains_again_after_the_event_time_cooldown(replay):
    """``cooldown_windows: 2`` on 91-day windows: a breach retrains when its window ends
    182 days or more after the last retrained window's end, so windows 0 and 2 of the
    four retrain and 1 and 3 link the last retrain. On the clock (before), the whole
    replay took seconds: only window 0 retrained."""
    gates = load_gate_config()
    monitor = monitor_with({"lease": "1h", "cooldown_windows": 2})
    started = []
    for index, (start, end) in enumerate(WINDOWS):
        verdict = job.judge_window(
            replay, gates, start, end, monitors=[monitor], launcher=judged_without_training
        )
        assert verdict.breached == ["mean-shift-kl"], (index, verdict.results)
        (taken,) = verdict.actions
        if "started retrain" in taken.detail:
            started.append(index)
        else:
            assert "retrain.cooldown 2 window(s) of event time" in taken.detail, taken.detail
    assert started == [0, 2]
    done = sorted(r.window[0] for r in retrains(replay) if r.status == DONE)
    assert done == [WINDOWS[i][0].isoformat() for i in (0, 2)]
