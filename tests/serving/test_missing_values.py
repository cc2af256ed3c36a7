"""Missing values as data, end to end over real files, the CLI and HTTP (issue 30).

A reference file (CSV and Parquet) with ~10% NaN in a numeric feature and ~10% missing
categories: ``contract infer`` writes the tolerated share and the file passes its own
contract; training learns the missing values; the reference profile holds the share, so
a window with it does not breach the missing-share monitor; the service answers a record
with nulls (finite, the same on pyfunc and ONNX Runtime) and still refuses a null for a
feature that was never missing, naming it.

Before: training failed (``column 'tenure' has 60 NaN/Inf value(s)``), and a contract
tolerating 16% nulls refused every record holding one.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from driftgate.cli import app
from driftgate.config.serving import ServingSettings
from tests.conftest import seed_mlflow_store
from tests.serving.conftest import ThreadedService
from tests.training.test_missing_values import loan_frame

PARITY = 1e-5


def _project(root, suffix: str) -> None:
    frame = loan_frame(rows=600, seed=11)
    data = root / f"loans.{suffix}"
    if suffix == "csv":
        frame.to_csv(data, index=False)
    else:
        frame.to_parquet(data, index=False)
    inferred = CliRunner().invoke(app, ["contract", "infer", str(data), "--optional", "default"])
    assert inferred.exit_code == 0, inferred.output
    (root / "contract.yaml").write_text(inferred.output)
    state = root / "state"
    (root / "driftgate.yaml").write_text(
        f"home: state\nmodel: {{name: loans}}\ntracking:\n"
        f"  uri: {seed_mlflow_store(state / 'mlflow.db')}\n"
        f"  artifact_location: {(state / 'mlartifacts').as_uri()}\n"
        f"data:\n  reference: {data.name}\n  target: default\n  contract: contract.yaml\n"
    )


@pytest.fixture(scope="module", params=["csv", "parquet"])
def project(request, tmp_path_factory):
    """Trained once per file format, registered as champion, its ONNX model logged."""
    from mlflow import MlflowClient

    from driftgate import registry
    from driftgate.config import load_config
    from driftgate.gates.checks.export_parity import ExportParityCheck, check_export_parity
    from driftgate.jobs import train as job
    from driftgate.jobs.promote import _bounds
    from driftgate.training.inputs import model_inputs
    from driftgate.training.params import TrainParams

    root = tmp_path_factory.mktemp(f"missing-{request.param}")
    _project(root, request.param)
    config = load_config(root / "driftgate.yaml")
    config.train = TrainParams(seed=2, max_epochs=3, patience=3)
    data = job.prepare_data(config)
    result = job.fit_model(config, data, on_epoch=None)
    outcome = job.register_model(config, data, result, job.evaluate_model(config, data, result))
    version = outcome.registered.version
    uri = config.tracking.uri
    MlflowClient(tracking_uri=uri, registry_uri=uri).set_registered_model_alias(
        "loans", "champion", version
    )
    rows = model_inputs(data.splits.test, result.spec.features)
    lower, upper = _bounds(data, result.spec)
    [exported] = check_export_parity(
        result.model, rows, ExportParityCheck(format="onnx"), lower, upper,
        tmp_path_factory.mktemp("onnx"),
    )  # fmt: skip
    assert exported.passed, exported.message
    run_id = outcome.registered.run_id
    registry.log_exports(config.tracking, run_id, [Path(p) for p in exported.artifacts])
    return root, config, data, result


def settings_for(root, backend: str) -> ServingSettings:
    return ServingSettings(
        sample_store_url=f"sqlite:///{root / f'{backend}-samples.db'}",
        control_store_url=f"sqlite:///{root / f'{backend}-control.db'}",
        backend=backend,
    )


def test_the_inferred_contract_tolerates_the_share_and_passes_its_own_file(project):
    root, config, _, _ = project
    contract = (root / "contract.yaml").read_text()
    # The observed ~10% with room, as a batch share: not a refusal of each null.
    share = float(re.search(r"tenure: \{dtype: float, .*max_null_share: ([\d.]+)", contract)[1])
    assert 0.1 < share < 0.25
    assert re.search(r"income: \{dtype: float, [^}]*nullable: false", contract)  # never missing
    source = str(root / Path(config.data.reference_source).name)
    contract_file = str(root / "contract.yaml")
    validated = CliRunner().invoke(app, ["contract", "validate", source, "-c", contract_file])
    assert validated.exit_code == 0, validated.output


def test_training_learnt_the_missing_features(project):
    result = project[3]
    assert [(s.name, s.missing) for s in result.spec.features] == [
        ("tenure", True), ("income", False), ("colour", True)
    ]  # fmt: skip
    assert result.spec.builtin["missing"] == [0, 2]


def test_a_window_with_the_reference_share_does_not_breach(project):
    from driftgate.jobs.train import fit_reference_profile
    from driftgate.monitors.drift import check_drift

    _, _, data, _ = project
    profile = fit_reference_profile(data, "loans")
    share = profile.features["tenure"].missing_share
    assert share == pytest.approx(data.splits.train["tenure"].isna().mean())
    assert 0.05 < share < 0.15
    window = loan_frame(rows=2000, seed=99)[data.features]  # the same ~10% missing
    report = check_drift(profile, window, tests=["missing_share"], levels={"missing_share": 0.01})
    for feature in ("tenure", "colour"):
        assert not report.result(feature, "missing_share").drifted
    risen = window.copy()
    risen.loc[: len(risen) // 4, "tenure"] = np.nan  # a real rise still breaches
    report = check_drift(profile, risen, tests=["missing_share"], levels={"missing_share": 0.01})
    assert report.result("tenure", "missing_share").drifted


def _records(data) -> list[dict]:
    frame = data.splits.test[data.features].head(20).astype(object)
    records = [
        {k: (None if v != v or v is None else v) for k, v in row.items()}
        for row in frame.to_dict("records")
    ]
    records[0]["tenure"] = None  # a numeric missing
    records[1]["colour"] = None  # a missing category
    records[2]["tenure"] = records[2]["colour"] = None
    return records


def test_records_with_nulls_are_served_the_same_on_pyfunc_and_onnx(project):
    root, config, data, _ = project
    records = _records(data)
    assert sum(r["tenure"] is None for r in records) >= 2
    answered = {}
    for backend in ("pyfunc", "onnxruntime"):
        with ThreadedService(config, settings_for(root, backend)) as service:
            response = service.client.post("/predict", json={"records": records})
            assert response.status_code == 200, response.text
            single = service.client.post("/predict", json={"records": records[:1]})
            assert single.status_code == 200, single.text
            answered[backend] = np.asarray(response.json()["probabilities"], dtype=np.float64)
            assert single.json()["probabilities"][0] == pytest.approx(
                answered[backend][0], abs=PARITY
            )
    assert np.isfinite(answered["pyfunc"]).all()
    np.testing.assert_allclose(answered["onnxruntime"], answered["pyfunc"], atol=PARITY)


def test_a_null_for_a_feature_never_missing_is_refused_naming_it(project):
    root, config, data, _ = project
    record = {**_records(data)[3], "income": None}
    with ThreadedService(config, settings_for(root, "pyfunc")) as service:
        response = service.client.post("/predict", json={"records": [record]})
    assert response.status_code == 422, response.text
    (error,) = response.json()["errors"]
    assert (error["field"], error["reason"]) == ("income", "null not allowed")


def test_without_a_contract_a_null_is_taken_for_a_feature_missing_in_training():
    from driftgate.serving.validation import build_checker
    from driftgate.training.features import FeatureSpec

    checker = build_checker([FeatureSpec("tenure", missing=True), FeatureSpec("income")], None)
    assert checker.validate({"tenure": None, "income": 1.0}) == []
    (error,) = checker.validate({"tenure": 1.0, "income": None})
    assert (error.field, error.reason) == ("income", "null not allowed")
