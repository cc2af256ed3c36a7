"""The real drift-check flow judges again a window whose labels arrived after it was
judged: a performance monitor's breach found late is recorded and acted on once — with
the samples, labels, reviews and monitor state on SQLite and on PostgreSQL."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from mlflow import MlflowClient

from driftgate import registry
from driftgate.config import load_config
from driftgate.flows.drift_check import drift_check_flow
from driftgate.gates.config import load_gate_config
from driftgate.jobs import drift_check as job
from driftgate.jobs.feedback import LabelInput, submit_labels
from driftgate.stores.labels import LabelStore
from driftgate.stores.reviews import ReviewStore
from driftgate.stores.samples import Sample, SqlSampleStore
from driftgate.training.data import feature_matrix
from driftgate.training.model import predict_proba
from tests.driftgate.stores.conftest import _postgres_database

LATE = ("2041-01-01", "2041-01-02")
NEXT = ("2041-01-02", "2041-01-03")
GATES = """\
monitors:
  - name: auc-drop
    metric: performance:roc_auc
    threshold: 0.05
    schedule: "0 0 * * *"
    window: 1d
    action: open_review
    min_labels: 100
"""


@pytest.fixture(params=["sqlite", "postgresql"])
def store_urls(request, tmp_path):
    """(sample store, control store): two SQLite files, or one throw-away PostgreSQL
    database holding both (the review, monitor-state and label tables beside the
    samples)."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'samples.db'}", f"sqlite:///{tmp_path / 'control.db'}"
    else:
        for url in _postgres_database():
            yield url, url


def test_the_flow_rejudges_a_window_once_its_labels_arrive(trained_model, tmp_path, store_urls):
    tracking = trained_model.config.tracking
    sample_url, control_url = store_urls
    (tmp_path / "gates.yaml").write_text(GATES)
    config_file = tmp_path / "driftgate.yaml"
    config_file.write_text(
        f"home: {tmp_path / 'home'}\ngates: {tmp_path / 'gates.yaml'}\n"
        f"tracking:\n  uri: {tracking.uri}\n  artifact_location: {tracking.artifact_location}\n"
        f"serving:\n  sample_store_url: {sample_url}\n  control_store_url: {control_url}\n"
        "monitoring:\n  evidently_report: false\n"
    )
    config = load_config(config_file)
    gates = load_gate_config(config.gates)
    version = trained_model.outcome.registered.version
    MlflowClient(tracking_uri=tracking.uri, registry_uri=tracking.uri).set_registered_model_alias(
        config.model.name, registry.CHAMPION_ALIAS, version
    )
    test = trained_model.data.splits.test.iloc[:500]
    features = list(trained_model.data.features)
    probabilities = predict_proba(trained_model.result.model, feature_matrix(test, features))
    truth = test["rain"].to_numpy().astype(int)
    flipped = np.where(np.random.default_rng(5).random(len(truth)) < 0.3, 1 - truth, truth)
    url = config.serving.sample_store(config.home_dir)
    store = SqlSampleStore(url)
    records = test[features].to_dict("records")
    for window in (LATE, NEXT):
        start = pd.Timestamp(window[0], tz="UTC")
        store.append(
            [
                Sample(start + pd.Timedelta(minutes=i), f"{window[0]}-{i}", 0, config.model.name,
                       version, {k: float(v) for k, v in records[i].items()}, float(p),
                       int(p >= 0.5))
                for i, p in enumerate(probabilities)
            ]
        )  # fmt: skip
    store.close()

    def label(indexes):
        labels = LabelStore(url)
        try:
            submit_labels(
                labels,
                [LabelInput(i, f"{LATE[0]}-{i}", 0, int(flipped[i])) for i in indexes],
                outputs_of=lambda name, v: ("binary", ()),
                horizon=None,
                source="test-labels",
            )
        finally:
            labels.close()

    label(range(10))
    first = job.judge_window(config, gates, *LATE)
    assert first.results[0].status == "insufficient_data"
    label(range(10, 500))
    summaries = drift_check_flow(
        config_path=str(config_file), end=pd.Timestamp(NEXT[1], tz="UTC").isoformat()
    )
    windows = [tuple(s["window"]) for s in summaries]
    late = tuple(pd.Timestamp(t, tz="UTC").isoformat() for t in LATE)
    assert windows[0] == late and len(windows) == 2  # the re-judged window, then the current
    assert summaries[0]["breached"] == ["auc-drop"]
    assert [a["changed"] for a in summaries[0]["actions"]] == [True]
    assert summaries[1]["insufficient_data"] == ["auc-drop"]  # NEXT has no labels
    again = drift_check_flow(
        config_path=str(config_file), end=pd.Timestamp(NEXT[1], tz="UTC").isoformat()
    )
    assert len(again) == 1  # nothing new to re-judge
    # The late breach's review is in the configured control store (PostgreSQL or SQLite).
    reviews = ReviewStore(control_url)
    try:
        (review,) = reviews.list(model_name=config.model.name)
    finally:
        reviews.close()
    assert review.monitor == "auc-drop" and review.last_window[0].startswith(LATE[0])
