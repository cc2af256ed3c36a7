"""examples/adopt-breast-cancer end to end: a model trained elsewhere (plain torch,
logged with ``mlflow.pytorch.log_model``) adopted, gated, served over real HTTP and
monitored by the real drift check, on a copy of the example's folder.

One loop, shared by the tests below (each asserts one part of it):
train_elsewhere.py (a subprocess, no driftgate) -> `driftgate adopt runs:/...`
-> `driftgate promote` -> the service under uvicorn replays production.csv (with
its injected texture drift) -> the drift check of the window.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from driftgate.cli import app

REPO_ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = REPO_ROOT / "examples" / "adopt-breast-cancer"
NOT_APPLICABLE = {
    "data_version",
    "reload_parity",
    "export_parity",
    "registry_parity",
    "overfitting",
}


def cli(*args: str):
    result = CliRunner().invoke(app, list(args), catch_exceptions=False)
    return result


@pytest.fixture(scope="module")
def loop(tmp_path_factory):
    from driftgate.config import load_config
    from driftgate.gates.config import load_gate_config

    project = tmp_path_factory.mktemp("adopt-example") / "adopt-breast-cancer"
    shutil.copytree(EXAMPLE, project, ignore=shutil.ignore_patterns(".driftgate", "data"))
    trained = subprocess.run(
        [sys.executable, str(project / "train_elsewhere.py"), "--project", str(project)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert trained.returncode == 0, trained.stderr[-3000:]
    run_uri = trained.stdout.strip().splitlines()[-1]
    assert run_uri.startswith("runs:/") and run_uri.endswith("/model")
    config_file = str(project / "driftgate.yaml")
    adopted = cli("adopt", run_uri, "--reference", str(project / "data" / "reference.csv"),
                  "--config", config_file)  # fmt: skip
    again = cli("adopt", run_uri, "--reference", str(project / "data" / "reference.csv"),
                "--config", config_file)  # fmt: skip
    promoted = cli("promote", "--config", config_file)
    config = load_config(config_file)
    return {
        "project": project,
        "run_uri": run_uri,
        "config": config,
        "gates": load_gate_config(config.gates),
        "adopted": adopted,
        "again": again,
        "promoted": promoted,
    }


def version_tags(config, version="1") -> dict:
    from mlflow import MlflowClient

    uri = config.tracking.uri
    client = MlflowClient(tracking_uri=uri, registry_uri=uri)
    return dict(client.get_model_version(config.model.name, version).tags)


def test_adopt_registers_the_run_and_tags_the_version(loop):
    adopted = loop["adopted"]
    assert adopted.exit_code == 0, adopted.output
    assert f"{loop['run_uri']} is models:/tumour-net/1" in adopted.output
    tags = version_tags(loop["config"])
    assert tags["driftgate.adopted"] == "true"
    assert tags["driftgate.registration"] == "complete"
    assert tags["driftgate.task"] == "binary"
    assert len(json.loads(tags["driftgate.features"])) == 30
    # the model classifies the reference period it was (mostly) trained on
    assert float(tags["reference_roc_auc"]) > 0.98
    assert float(tags["reference_accuracy"]) > 0.95


def test_adopting_again_changes_nothing(loop):
    again = loop["again"]
    assert again.exit_code == 0, again.output
    assert "nothing changed" in again.output
    from mlflow import MlflowClient

    uri = loop["config"].tracking.uri
    versions = MlflowClient(tracking_uri=uri, registry_uri=uri).search_model_versions(
        "name='tumour-net'"
    )
    assert [str(v.version) for v in versions] == ["1"]  # the run was registered once


def test_the_gate_scores_the_held_out_rows_and_reports_torch_only_checks_not_applicable(loop):
    promoted = loop["promoted"]
    assert promoted.exit_code == 0, promoted.output
    assert "PASSED: champion -> v1" in promoted.output
    report = loop["config"].home_dir / "reports" / "promote-tumour-net-v1"
    gate = json.loads((report / "gate.json").read_text())
    status = {c["name"]: c["status"] for c in gate["checks"]}
    assert {n for n, s in status.items() if s == "NOT_APPLICABLE"} == NOT_APPLICABLE
    assert all(not c["passed"] for c in gate["checks"] if c["name"] in NOT_APPLICABLE)
    # every check that applies ran and passed, the held-out metrics among them
    assert {n for n, s in status.items() if s == "PASS"} >= {
        "test_roc_auc", "test_accuracy", "test_log_loss", "finite_outputs", "signature",
        "degenerate_output", "environment",
    }  # fmt: skip
    metrics = {c["name"]: float(c["observed"]) for c in gate["checks"] if c["group"] == "promotion"}
    assert metrics["test_roc_auc"] > 0.95 and metrics["test_accuracy"] > 0.9
    junit = (report / "gate.junit.xml").read_text()
    assert junit.count("<skipped") == len(NOT_APPLICABLE)
    assert "NOT_APPLICABLE" in (report / "gate.md").read_text()
    tags = version_tags(loop["config"])
    assert tags["driftgate.gate.reload_parity"].startswith("NOT_APPLICABLE: adopted model")
    assert set(tags["driftgate.gate.not_applicable_checks"].split(",")) == NOT_APPLICABLE
    assert tags["driftgate.gate.failed_checks"] == "-"


def test_the_champion_is_served_and_the_injected_drift_opens_a_review(loop):
    from driftgate.jobs.drift_check import judge_recent
    from driftgate.stores.factories import review_store
    from tests.serving.conftest import ThreadedService

    config = loop["config"]
    production = pd.read_csv(loop["project"] / "data" / "production.csv")
    features = [c for c in production.columns if c != "benign"]
    with ThreadedService(config, config.serving) as service:
        answered = []
        for start in range(0, len(production), 50):
            records = [
                {k: float(v) for k, v in row.items()}
                for row in production[features].iloc[start : start + 50].to_dict("records")
            ]
            response = service.client.post("/predict", json={"records": records})
            assert response.status_code == 200, response.text
            body = response.json()
            assert body["model_name"] == "tumour-net" and body["model_version"] == "1"
            assert len(body["probabilities"]) == len(records) == len(body["classes"])
            assert all(0.0 <= p <= 1.0 for p in body["probabilities"])
            assert body["sample_stored"] is True
            answered += body["probabilities"]
    assert len(answered) == len(production) == 169

    verdicts = judge_recent(config, loop["gates"], window="1h")
    assert len(verdicts) == 1
    verdict = verdicts[0]
    assert verdict.rows == 169 and verdict.model_version == "1"
    assert verdict.breached == ["mean-shift-kl"]
    [result] = verdict.results
    # the injected shift (KL 2.3-2.4 here), not noise (the others' largest: 0.11)
    assert set(result.breached_features) == {"mean_texture", "worst_texture"}
    store = review_store(config)
    try:
        reviews = store.list()
    finally:
        store.close()
    assert [(r.monitor, r.model_version) for r in reviews] == [("mean-shift-kl", "1")]
