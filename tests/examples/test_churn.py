"""The churn example, as a user runs it: ``driftgate --config examples/churn/driftgate.yaml``
train → promote → serve (real HTTP) → drift-check, through real MLflow, with no code
change and no renaming.

The data has CamelCase columns, a pandas ``category`` (Region) and plain text columns
(PlanType; PaymentMethod with rare levels), a real ``timestamp``, the label in its own
file, and a production file whose second week carries an injected drift
(examples/churn/generate.py).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import httpx
import pandas as pd
import pytest
from mlflow import MlflowClient
from typer.testing import CliRunner

from driftgate import registry
from driftgate.cli import app
from driftgate.config import load_config
from driftgate.jobs.demo import start_service, stop_service, wait_until_ready
from driftgate.stores.samples import open_sample_reader
from driftgate.training.data import read_table
from tests.conftest import REPO_ROOT, free_port
from tests.examples.conftest import run_cli

EXAMPLE = REPO_ROOT / "examples" / "churn"
FEATURES = ["Region", "PlanType", "PaymentMethod", "TenureMonths", "MonthlyCharges", "SupportCalls"]
DRIFT_STARTS = "2024-07-08"


driftgate = run_cli


def library_noise(stderr: str) -> list[str]:
    """Lines of a normal run's stderr that are a library's warnings, not driftgate's news."""
    return [
        line
        for line in stderr.splitlines()
        if "Warning" in line or "warnings.warn" in line or "RuntimeWarning" in line
    ]


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    """The example folder as a clean clone has it (its state stays in the copy)."""
    root = tmp_path_factory.mktemp("churn") / "churn"
    shutil.copytree(EXAMPLE, root, ignore=shutil.ignore_patterns(".driftgate", "__pycache__"))
    return root / "driftgate.yaml"


def test_the_seeded_script_writes_exactly_the_committed_files(tmp_path):
    done = subprocess.run(
        [sys.executable, str(EXAMPLE / "generate.py"), "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    for name in ("reference.pq", "labels.csv", "production.csv"):
        pd.testing.assert_frame_equal(read_table(tmp_path / name), read_table(EXAMPLE / name))
    reference = read_table(EXAMPLE / "reference.pq")
    assert isinstance(reference["Region"].dtype, pd.CategoricalDtype)
    assert reference["PlanType"].dtype == object
    rare = reference["PaymentMethod"].value_counts(normalize=True)
    assert rare["Voucher"] < 0.01 and rare["Crypto"] < 0.01


def test_contract_infer_output_validates_the_file_it_came_from(tmp_path):
    runner = CliRunner()
    inferred = runner.invoke(app, ["contract", "infer", str(EXAMPLE / "reference.pq")])
    assert inferred.exit_code == 0, inferred.output
    assert "Region:\n    dtype: string" in inferred.output  # a category, not its dtype name
    (tmp_path / "inferred.yaml").write_text(inferred.output)
    checked = runner.invoke(
        app,
        [
            "contract",
            "validate",
            str(EXAMPLE / "reference.pq"),
            "--contract",
            str(tmp_path / "inferred.yaml"),
        ],
    )
    assert checked.exit_code == 0, checked.output
    # The committed contract, edited from that scaffold, holds on its data too.
    committed = runner.invoke(
        app,
        ["contract", "validate", "--config", str(EXAMPLE / "driftgate.yaml"), "--format", "json"],
    )
    assert committed.exit_code == 0, committed.output


def hourly_requests(production: pd.DataFrame) -> list[dict]:
    """One request per hour of production, its records stamped with the hour."""
    requests = []
    for hour, rows in production.groupby(production["timestamp"].dt.floor("h")):
        records = rows.drop(columns=["timestamp"]).to_dict(orient="records")
        requests.append({"records": records, "timestamp": hour.tz_localize("UTC").isoformat()})
    return requests


def test_train_promote_serve_and_drift_check_the_example(project):
    # -- train: the features taken are said, and stderr holds no library warnings
    trained = driftgate(project, "train")
    assert trained.returncode == 0, trained.stderr
    assert f"taking 6 column(s): {', '.join(FEATURES)}" in trained.stderr
    assert "excluded by data.exclude: CustomerId, LegacyScore" in trained.stderr
    assert library_noise(trained.stderr) == []
    config = load_config(project)
    client = MlflowClient(tracking_uri=config.tracking.uri, registry_uri=config.tracking.uri)
    version = registry.latest_version(config.tracking, config.model.name)
    run = client.get_run(client.get_model_version(config.model.name, version).run_id)
    params = run.data.params
    assert json.loads(params["features"]) == FEATURES
    assert json.loads(params["categorical_features"]) == FEATURES[:3]
    assert params["time_column"] == "timestamp"
    assert params["train_start"].startswith("2024-01-01")
    assert run.data.tags[registry.TAG_DVC_DATA_PATH] == "reference.pq"  # relative
    assert run.data.metrics["test_roc_auc"] > 0.70
    specs = registry.version_feature_specs(config.tracking, config.model.name, version)
    assert [s.kind for s in specs] == ["categorical"] * 3 + ["numeric"] * 3
    assert specs[0].categories == ("North", "South", "East", "West")  # the contract's order

    # -- promote: every gate on the categorical model
    promoted = driftgate(project, "promote")
    assert promoted.returncode == 0, promoted.stdout + promoted.stderr
    assert "PASSED: champion -> v" in promoted.stdout
    assert library_noise(promoted.stderr) == []

    # -- serve: text categories in, an unknown region refused by name, samples stored
    port = free_port()
    os.environ["DRIFTGATE__SERVING__PORT"] = str(port)
    try:
        service = start_service(str(project), port, project.parent / "service.log")
    finally:
        del os.environ["DRIFTGATE__SERVING__PORT"]
    url = f"http://127.0.0.1:{port}"
    production = read_table(project.parent / "production.csv")
    assert pd.api.types.is_datetime64_any_dtype(production["timestamp"])
    try:
        wait_until_ready(url, service)
        with httpx.Client(base_url=url, timeout=60) as http:
            record = production.drop(columns=["timestamp"]).iloc[0].to_dict()
            bad = http.post("/predict", json={"records": [{**record, "Region": "Atlantis"}]})
            assert bad.status_code == 422
            assert [e["field"] for e in bad.json()["errors"]] == ["Region"]
            statuses = [
                http.post("/predict", json=request).status_code
                for request in hourly_requests(production)
            ]
            answer = http.post(
                "/predict",
                json={
                    "records": [{**record, "PaymentMethod": "Wallet"}],
                    "timestamp": "2024-07-16T00:00:00+00:00",
                },
            ).json()
    finally:
        stop_service(service)
    assert set(statuses) == {200}
    assert len(answer["probabilities"]) == 1 and 0 < answer["probabilities"][0] < 1
    assert answer["classes"] in ([0], [1])
    window = open_sample_reader(config.serving.sample_store(config.home_dir)).read_window(
        "2024-07-01", "2024-07-15"
    )
    assert len(window) == len(production)
    assert set(window["Region"]) == {"North", "South", "East", "West"}  # categories kept
    assert "Wallet" in set(window["PaymentMethod"])

    # -- drift-check: the clean week passes, the drifted week opens a review
    calm = driftgate(project, "drift-check", "--window", "7d", "--end", DRIFT_STARTS)
    assert calm.returncode == 0, calm.stdout + calm.stderr
    drifted = driftgate(project, "drift-check", "--window", "7d", "--end", "2024-07-15")
    assert drifted.returncode == 1, drifted.stdout + drifted.stderr
    assert library_noise(calm.stderr + drifted.stderr) == []
    reviews = driftgate(project, "reviews", "list")
    assert reviews.returncode == 0, reviews.stderr
    assert "distribution-kl" in reviews.stdout and "category-mix-chi2" in reviews.stdout
    assert "Region" in reviews.stdout
    assert "category-mix-chi2: chi2 p = " in reviews.stdout  # a p-value below its level
    # Issue 30: how large the change is and which categories moved, in the action's
    # text and in the drift report's JSON (Region West from 10% to 55%).
    (action,) = [x for x in drifted.stdout.splitlines() if x.startswith("- category-mix-chi2:")]
    moved = re.search(r"Region: Cramér's V (0\.\d+), West (0\.\d\d) -> (0\.\d\d)", action)
    assert moved, action
    assert float(moved[2]) < 0.2 and float(moved[3]) > 0.4
    (summary,) = [x for x in drifted.stdout.splitlines() if x.startswith("report: ")]
    evidence = json.loads(
        (Path(summary.removeprefix("report: ")).parent / "drift.json").read_text()
    )
    (region,) = [r for r in evidence["results"] if (r["feature"], r["test"]) == ("Region", "chi2")]
    assert f"{region['effect_size']:.2g}" == moved[1]
    assert region["details"]["moved"][0]["level"] == "West"
