"""The version a retrain makes is monitored against what it was trained on (issue 29):
its reference profile is fitted on its training split and its outputs profile on its
validation split, both read from the retrain's data version (the configured data plus
the recent labelled records). So after a retrain triggered by a group of unusual
windows, an ordinary window does not breach input drift on the new reference. On
census data such a retrain once gave a reference on which every later ordinary window
breached (KL 0.76).

Real drift checks (breach, ``retrain`` action, in-process retrain: data, contract,
training, registry, gate) on a real SQLite sample and label store and the session's
MLflow store, under a model name of its own.
"""

from __future__ import annotations

import numpy as np
import pytest

from driftgate import registry
from driftgate.gates.config import load_gate_config
from driftgate.jobs import drift_check as job
from driftgate.jobs.feedback import LabelInput, open_label_store, submit_labels
from driftgate.monitors.rules import Monitor
from driftgate.stores.retrains import DONE
from driftgate.stores.samples import SqlSampleStore
from driftgate.training.params import TrainParams
from tests.conftest import mlflow_client, register_session_model, retrains
from tests.driftgate.test_drift_check_job import write_window
from tests.driftgate.test_retrain_job import accepted_records

# Three unusual days (records of the 1990s), the last judged; then an ordinary day.
UNUSUAL = [("2035-03-01", "2035-03-02"), ("2035-03-02", "2035-03-03"), ("2035-03-03", "2035-03-04")]
ORDINARY = ("2035-03-04", "2035-03-05")
ROWS = 500


@pytest.fixture
def project(trained_model, tmp_path):
    config = trained_model.config.model_copy(deep=True)
    config.model = config.model.model_copy(update={"name": "rainfall-new-reference"})
    config.home = str(tmp_path / "home")
    config.serving = config.serving.model_copy(
        update={
            "sample_store_url": f"sqlite:///{tmp_path / 'samples.db'}",
            "control_store_url": f"sqlite:///{tmp_path / 'control.db'}",
        }
    )
    config.train = TrainParams(max_epochs=4, patience=2)  # the profiles are tested, not the fit
    # The session's model, registered under this module's name, is the champion.
    version = register_session_model(trained_model, config.model.name)
    client = mlflow_client(config.tracking.uri)
    return {"config": config, "client": client, "champion": str(version)}


def test_an_ordinary_window_after_a_retrain_on_unusual_windows_does_not_breach(
    project, trained_model, tmp_path
):
    config, data = project["config"], trained_model.data
    features = data.features
    late = data.splits.production[data.splits.production["date"].dt.year >= 1990]
    unusual = accepted_records(late, data).iloc[: ROWS * len(UNUSUAL)]
    rng = np.random.default_rng(11)
    pool = data.splits.train[data.splits.train["sea_level_pressure"].abs() < 10]
    ordinary = pool.iloc[rng.integers(0, len(pool), ROWS)]
    store = SqlSampleStore(config.serving.sample_store(config.home_dir))
    for index, window in enumerate(UNUSUAL):
        write_window(store, unusual.iloc[index * ROWS : (index + 1) * ROWS], features, window,
                     project["champion"])  # fmt: skip
    write_window(store, ordinary, features, ORDINARY, project["champion"])
    store.close()
    labels = open_label_store(config)
    try:
        for index, window in enumerate(UNUSUAL):
            truth = unusual["rain"].iloc[index * ROWS : (index + 1) * ROWS].astype(int).tolist()
            outcome = submit_labels(
                labels,
                [LabelInput(i, f"{window[0]}-{i}", 0, truth[i]) for i in range(ROWS)],
                outputs_of=lambda name, version: ("binary", ()),
                horizon=None, source="test-labels", all_or_nothing=False,
            )  # fmt: skip
            assert outcome.counts()["accepted"] == ROWS
    finally:
        labels.close()
    gates = load_gate_config()
    kl = next(m for m in gates.monitors if m.name == "mean-shift-kl")
    monitor = Monitor(
        **{**kl.model_dump(), "action": "retrain", "retrain": {"data": {"recent": "3d"}}}
    )

    breach = job.judge_window(config, gates, *UNUSUAL[-1], monitors=[monitor])
    assert breach.breached == ["mean-shift-kl"]
    (retrain,) = retrains(config)
    assert retrain.status == DONE, retrain.outcome
    assert "labelled records of the last 3d" in retrain.detail, retrain.detail
    # The new version is the champion (whether or not this gate promoted it): its
    # reference is what the monitors judge.
    project["client"].set_registered_model_alias(
        config.model.name, registry.CHAMPION_ALIAS, retrain.candidate_version
    )
    verdict = job.judge_window(config, gates, *ORDINARY, monitors=[kl])
    assert verdict.model_version == retrain.candidate_version
    (result,) = verdict.results
    assert verdict.breached == [], result
    # Its reference was fitted on its training split: the configured one plus the
    # unusual windows' training part.
    profile = registry_profile(config, retrain.candidate_version, tmp_path)
    added = int(retrain.detail.split("(")[1].split(" to train")[0])
    assert profile.rows == len(data.splits.train) + added and added > 0
    assert profile.metadata["split"] == "train"


def registry_profile(config, version: str, folder):
    from driftgate.monitors.profile import ReferenceProfile

    return ReferenceProfile.load(
        registry.download_reference_profile(config.tracking, config.model.name, version, folder)
    )
