"""The real drift-check flow on rejected traffic and on the model's outputs (issue 16):
a real service (real HTTP, real SQLite sample store) receives a calm day and a day
whose requests are partly refused by the contract and whose accepted records the
model is unsure of; the Prefect flow judges each day and its results come back with
``rejected_share``, ``ks`` on all received inputs (``population: all``),
``prediction_drift`` and ``performance_estimate:accuracy`` decided as the job decides
them (tests/driftgate/test_drift_check_rejected.py, test_drift_check_outputs.py)."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from driftgate import registry
from driftgate.config import load_config
from driftgate.config.serving import ServingSettings
from driftgate.flows.drift_check import drift_check_flow
from driftgate.jobs import drift_check as drift_check_job
from driftgate.jobs.drift_check import review_store
from driftgate.training.data import feature_matrix
from driftgate.training.model import predict_proba
from tests.conftest import mlflow_client
from tests.flows.prefect_runs import task_names
from tests.serving.conftest import ThreadedService

CALM, SHIFTED = "2043-01-01", "2043-01-02"
REQUESTS, RECORDS = 100, 8
REFUSED_EVERY = 5  # every 5th request of the shifted day: pressures out of the contract
OUT_OF_RANGE = 5.0
GATES = """\
monitors:
{}
"""
MONITORS = {
    "rejected": "rejected_share",
    "rejected-pressure": "rejected_share",
    "ks-accepted": "ks",
    "ks-all": "ks",
    "outputs-shift": "prediction_drift",
    "accuracy-estimate": "performance_estimate:accuracy",
}


def gates_yaml() -> str:
    def one(name: str, metric: str) -> str:
        threshold = 0.02 if metric == "rejected_share" else 0.05
        extra = ""
        if name in ("rejected-pressure", "ks-accepted", "ks-all"):
            extra += "    features: [sea_level_pressure]\n"
        if name == "ks-all":
            extra += "    population: all\n"
        return (
            f"  - name: {name}\n    metric: {metric}\n    threshold: {threshold}\n"
            f'    schedule: "0 0 * * *"\n    window: 1d\n    action: open_review\n{extra}'
        )

    return GATES.format("".join(one(n, m) for n, m in MONITORS.items()))


@pytest.fixture(scope="module")
def served(trained_model, tmp_path_factory):
    root = tmp_path_factory.mktemp("flow-traffic")
    tracking = trained_model.config.tracking
    (root / "gates.yaml").write_text(gates_yaml())
    config_file = root / "driftgate.yaml"
    config_file.write_text(
        f"home: {root / 'home'}\ngates: {root / 'gates.yaml'}\n"
        f"tracking:\n  uri: {tracking.uri}\n  artifact_location: {tracking.artifact_location}\n"
        f"serving:\n  sample_store_url: sqlite:///{root / 'samples.db'}\n"
        f"  control_store_url: sqlite:///{root / 'control.db'}\n"
        "  accept_client_timestamps: true\n"
        "monitoring:\n  evidently_report: false\n  max_catch_up_windows: 0\n"
    )
    config = load_config(config_file)
    mlflow_client(tracking.uri).set_registered_model_alias(
        config.model.name, registry.CHAMPION_ALIAS, trained_model.outcome.registered.version
    )
    data = trained_model.data
    pool = data.splits.validation
    probabilities = predict_proba(trained_model.result.model, feature_matrix(pool, data.features))
    rng = np.random.default_rng(7)
    calm = pool.iloc[rng.integers(0, len(pool), REQUESTS * RECORDS)]  # like the reference
    # Records the model is unsure of: outputs pushed towards 0.5 (prediction drift, a
    # lower estimated accuracy).
    unsure = pool.iloc[rng.choice(np.flatnonzero(np.abs(probabilities - 0.5) < 0.15),
                                  REQUESTS * RECORDS)]  # fmt: skip
    sent = {}
    with ThreadedService(config, ServingSettings(**config.serving.model_dump())) as service:
        for day, frame in ((CALM, calm), (SHIFTED, unsure)):
            sent[day] = post_day(service.client, frame, data.features, day, refuse=day == SHIFTED)
    return {"config": config, "file": config_file, "data": data, "sent": sent}


def post_day(client, frame, features, day, refuse: bool) -> dict:
    """Post the day's records, ``RECORDS`` per request; return the statuses and the
    pressures the service received."""
    start = pd.Timestamp(day, tz="UTC")
    statuses, pressures = [], []
    for r in range(REQUESTS):
        records = [
            {f: None if math.isnan(float(v)) else float(v) for f, v in row.items()}
            for row in frame[features].iloc[r * RECORDS : (r + 1) * RECORDS].to_dict("records")
        ]
        if refuse and r % REFUSED_EVERY == 0:
            for record in records:
                record["sea_level_pressure"] = OUT_OF_RANGE
        moment = start + pd.Timedelta(days=1) * r / REQUESTS
        answer = client.post(
            "/predict",
            json={"timestamp": moment.isoformat(), "records": records},
            headers={"X-Request-ID": f"{day}-{r}"},
        )
        statuses.append(answer.status_code)
        pressures += [(rec["sea_level_pressure"], answer.status_code) for rec in records]
    return {"statuses": statuses, "pressures": pressures}


def judge(served, day):
    """The drift-check flow on ``day``: its one summary, the MLflow run's metrics and the
    monitors table the flow published to Prefect."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterFlowRunId

    end = (pd.Timestamp(day, tz="UTC") + pd.Timedelta(days=1)).isoformat()
    state = drift_check_flow(config_path=str(served["file"]), end=end, return_state=True)
    assert state.is_completed(), state.message
    (summary,) = state.result()
    # One window: the drift-check job's steps, each a task, in the job's order.
    assert task_names(state.state_details.flow_run_id) == drift_check_job.STEPS
    run = mlflow_client(served["config"].tracking.uri).get_run(summary["run_id"])
    with get_client(sync_client=True) as client:
        artifacts = client.read_artifacts(
            artifact_filter=ArtifactFilter(
                flow_run_id=ArtifactFilterFlowRunId(any_=[state.state_details.flow_run_id])
            )
        )
    (table,) = [a for a in artifacts if a.type == "table"]
    rows = json.loads(table.data)  # Prefect stores a table artifact as JSON text
    return summary, run.data.metrics, {row["monitor"]: row for row in rows}


def test_the_flow_judges_rejected_traffic_and_outputs(served):
    calm_sent, shifted_sent = served["sent"][CALM], served["sent"][SHIFTED]
    assert set(calm_sent["statuses"]) == {200}
    refused = REQUESTS // REFUSED_EVERY
    assert shifted_sent["statuses"].count(422) == refused
    assert shifted_sent["statuses"].count(200) == REQUESTS - refused

    calm, calm_metrics, calm_table = judge(served, CALM)
    assert calm["rows"] == REQUESTS * RECORDS
    assert calm["breached"] == [] and calm["insufficient_data"] == [] and calm["actions"] == []
    assert set(calm_table) == set(MONITORS)
    assert {r["status"] for r in calm_table.values()} == {"ok"}
    assert calm_metrics["monitor.rejected.observed"] == 0.0
    assert calm_metrics["rejected_rows"] == 0.0

    shifted, metrics, table = judge(served, SHIFTED)
    accepted_rows = (REQUESTS - refused) * RECORDS
    rejected_rows = refused * RECORDS
    assert shifted["rows"] == accepted_rows
    # Every monitor breaches (the unsure records' pressures are shifted too); the
    # refused pressures are visible as rejections and in the drift on all inputs.
    assert set(shifted["breached"]) == set(MONITORS), table
    assert {a["monitor"] for a in shifted["actions"]} == set(shifted["breached"])
    assert all(a["action"] == "open_review" and a["changed"] for a in shifted["actions"])
    assert {name: row["metric"] for name, row in table.items()} == MONITORS
    assert {name for name, row in table.items() if row["breached"]} == set(shifted["breached"])
    # rejected_share: refused / received records, exactly; on the field too.
    share = rejected_rows / (accepted_rows + rejected_rows)
    assert metrics["rejected_rows"] == rejected_rows and metrics["requests"] == REQUESTS
    assert metrics["monitor.rejected.observed"] == pytest.approx(share)
    assert metrics["monitor.rejected-pressure.observed"] == pytest.approx(share)
    # ks on all received pressures includes the refused ones; on accepted, not.
    reference = served["data"].splits.train["sea_level_pressure"].dropna()
    received = [p for p, _ in shifted_sent["pressures"] if p is not None]
    accepted = [p for p, status in shifted_sent["pressures"] if p is not None and status == 200]
    assert len(received) - len(accepted) == rejected_rows
    for name, values in (("ks-all", received), ("ks-accepted", accepted)):
        expected = stats.ks_2samp(reference, values).pvalue
        assert metrics[f"monitor.{name}.observed"] == pytest.approx(expected, rel=1e-6), name
    assert metrics["monitor.ks-all.observed"] < metrics["monitor.ks-accepted.observed"]
    # The outputs: drifted, and an estimated accuracy drop beyond the tolerated 0.05.
    assert "prediction" in table["outputs-shift"]["features"]
    assert metrics["monitor.accuracy-estimate.drop"] > 0.05
    assert metrics["monitor.accuracy-estimate.standard_error"] > 0
    store = review_store(served["config"])
    try:
        opened = {r.monitor for r in store.list(status="open")}
    finally:
        store.close()
    assert opened == set(shifted["breached"])
