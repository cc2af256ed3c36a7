"""The gate judged on the present (issue 29): a real MLflow SQLite store, two real
trained versions, and a retrain-shaped data folder whose test split ends with
labelled production rows (the recent slice).

Before ``promotion.recent`` and the ``trivial_baseline`` check, the gate compared the
candidate with the champion on the whole test split only, and the candidates below
passed it; each test shows that first (the gate without the new rules), then the
refusal.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from driftgate.config import load_config
from driftgate.gates.config import load_gate_config
from driftgate.jobs import promote as promote_job
from driftgate.jobs import train as train_job
from driftgate.training.inputs import model_inputs
from driftgate.training.prepared import WINDOW_ROWS_FILE, save_prepared
from driftgate.training.train import TrainParams
from tests.conftest import mlflow_client, register_session_fit, seed_mlflow_store

RECENT_ROWS = 120
GATES = """
promotion:
  split: test
  metrics:
    - {metric: roc_auc, greater_is_better: true, threshold: 0.6, min_absolute_change: 0.0}
  RECENT
model_checks:
  latency: {repeats: 5}
  memory: {enabled: false}
  export_parity: {enabled: false}
  trivial_baseline: {enabled: BASELINE}
"""


def gates(tmp_path, recent: bool):
    text = GATES.replace("RECENT", "recent: {rows: 1000, min_rows: 30}" if recent else "")
    path = tmp_path / ("recent.yaml" if recent else "old.yaml")
    path.write_text(text.replace("BASELINE", "true" if recent else "false"))
    return load_gate_config(path)


@pytest.fixture(scope="module")
def store(trained_model, tmp_path_factory):
    root = tmp_path_factory.mktemp("recent")
    (root / "driftgate.yaml").write_text("home: state\nmodel:\n  name: judged\n")
    seed_mlflow_store(root / "state" / "mlflow.db")  # the store `home: state` opens
    config = load_config(root / "driftgate.yaml")
    data = train_job.prepare_data(config)
    config.train = TrainParams(hidden_sizes=[8], max_epochs=3)
    result = train_job.fit_model(config, data, on_epoch=None)
    metrics = train_job.evaluate_model(config, data, result)
    champion = train_job.register_model(config, data, result, metrics).registered.version
    config.train = TrainParams()  # the candidate is the session's fit (same data and seed)
    candidate = register_session_fit(trained_model, config, data).registered.version
    versions = {"champion": champion, "candidate": candidate}
    models = {"champion": result, "candidate": trained_model.result}
    client = mlflow_client(config.tracking.uri)
    client.set_registered_model_alias("judged", "champion", versions["champion"])
    production = data.splits.production
    answers = {
        name: train_job.flavour_of(result.spec)
        .predict(result.model, model_inputs(production, result.spec.features))
        .ravel()
        >= 0.5
        for name, result in models.items()
    }
    return {"root": root, "config": config, "data": data, "answers": answers, **versions}


def with_recent_rows(store, rows: pd.DataFrame, name: str):
    """The configured splits with ``rows`` appended to the test split as a retrain's
    window adds them (``window_rows.txt`` says how many): the config reading them."""
    data = store["data"]
    splits = data.splits
    test = pd.concat([splits.test, rows], ignore_index=True)
    joined = type(splits)(splits.train, splits.validation, test, splits.production)
    folder = store["root"] / name
    save_prepared(
        pd.concat([joined.reference, joined.production], ignore_index=True), joined, folder
    )
    (folder / WINDOW_ROWS_FILE).write_text(f"train 0\nvalidation 0\ntest {len(rows)}\n")
    config = store["config"]
    return config.model_copy(
        update={"data": config.data.model_copy(update={"prepared": str(folder)})}
    )


def by_name(result):
    return {check.name: check for check in result.checks}


def test_a_candidate_worse_than_the_majority_class_on_recent_labels_is_refused(store, tmp_path):
    """Recent production: mostly dry days on which the candidate answers rain. On the
    old test split it beats the champion (and passed the gate before this change)."""
    answers = store["answers"]["candidate"]
    rows = store["data"].splits.production[answers].iloc[:RECENT_ROWS].copy()
    rng = np.random.default_rng(0)
    rows["rain"] = (rng.random(len(rows)) < 0.15).astype(rows["rain"].dtype)  # 85% dry
    config = with_recent_rows(store, rows, "majority")

    before = promote_job.evaluate_gates(config, gates(tmp_path, recent=False), store["candidate"])
    assert before.passed, [c.message for c in before.failures]

    after = promote_job.evaluate_gates(config, gates(tmp_path, recent=True), store["candidate"])
    checks = by_name(after)
    assert not after.passed
    assert checks["test_roc_auc_vs_champion_abs"].passed  # the old split still says better
    baseline = checks["trivial_baseline_accuracy"]
    assert baseline.failed and "majority class" in baseline.message
    assert "recent slice (120 newest labelled production rows" in baseline.observed


def test_a_candidate_worse_than_the_champion_on_the_recent_slice_is_refused(store, tmp_path):
    """Recent production where the two disagree, labelled as the champion answered."""
    answers = store["answers"]
    disagree = answers["candidate"] != answers["champion"]
    rows = store["data"].splits.production[disagree].iloc[:RECENT_ROWS].copy()
    assert len(rows) >= 30
    rows["rain"] = answers["champion"][disagree][: len(rows)].astype(rows["rain"].dtype)
    config = with_recent_rows(store, rows, "champion-right")
    old = gates(tmp_path, recent=False)
    assert promote_job.evaluate_gates(config, old, store["candidate"]).passed

    after = promote_job.evaluate_gates(config, gates(tmp_path, recent=True), store["candidate"])
    recent = by_name(after)["recent_vs_champion"]
    assert not after.passed and recent.failed
    assert "refused whatever the configured split says" in recent.message

    # The same rows labelled as the candidate answered: better beyond chance, it passes.
    rows["rain"] = answers["candidate"][disagree][: len(rows)].astype(rows["rain"].dtype)
    config = with_recent_rows(store, rows, "candidate-right")
    won = promote_job.evaluate_gates(config, gates(tmp_path, recent=True), store["candidate"])
    assert by_name(won)["recent_vs_champion"].passed
