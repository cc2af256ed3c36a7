"""A boolean feature over HTTP: every common spelling of a boolean is accepted and
stored as one encoding; anything else is refused with the spellings it could have been.

Before: with the contract `contract infer` writes (``dtype: bool``), JSON ``false`` got
"Input should be a valid number" and ``"false"``/``0``/``1`` "expected bool, got str";
without a contract, ``"True"``/``0``/``1`` were scored silently as an unseen category.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from driftgate.cli import app
from driftgate.config.serving import ServingSettings
from driftgate.stores.samples import SqlSampleStore
from tests.conftest import seed_mlflow_store
from tests.serving.conftest import ThreadedService

SPELLINGS = [True, False, "true", "False", "TRUE", 0, 1]


def _project(root, contract: bool):
    rng = np.random.default_rng(3)
    rows = 300
    member = rng.random(rows) < 0.5
    spend = rng.gamma(2.0, 10.0, rows).round(2)
    frame = pd.DataFrame(
        {"Member": member, "Spend": spend, "Churned": (~member & (spend < 20)).astype(int)}
    )
    frame.to_csv(root / "reference.csv", index=False)
    state = root / "state"
    config = (
        f"home: state\nmodel: {{name: booleans}}\ntracking:\n"
        f"  uri: {seed_mlflow_store(state / 'mlflow.db')}\n"
        f"  artifact_location: {(state / 'mlartifacts').as_uri()}\n"
        "data:\n  reference: reference.csv\n  target: Churned\n"
    )
    if contract:
        inferred = CliRunner().invoke(
            app, ["contract", "infer", str(root / "reference.csv"), "--optional", "Churned"]
        )
        assert inferred.exit_code == 0, inferred.output
        assert "Member: {dtype: bool" in inferred.output
        (root / "contract.yaml").write_text(inferred.output)
        config += "  contract: contract.yaml\n"
    (root / "driftgate.yaml").write_text(config)


@pytest.fixture(scope="module", params=["contract", "no-contract"])
def served(request, tmp_path_factory):
    from mlflow import MlflowClient

    from driftgate.config import load_config
    from driftgate.jobs import train as job
    from driftgate.training.params import TrainParams

    root = tmp_path_factory.mktemp("booleans")
    _project(root, contract=request.param == "contract")
    config = load_config(root / "driftgate.yaml")
    config.train = TrainParams(seed=1, max_epochs=2, patience=2)
    data = job.prepare_data(config)
    member = data.specs[0]
    assert (member.name, member.kind, member.categories) == (
        "Member", "categorical", ("false", "true")
    )  # fmt: skip
    result = job.fit_model(config, data, on_epoch=None)
    outcome = job.register_model(config, data, result, job.evaluate_model(config, data, result))
    uri = config.tracking.uri
    MlflowClient(tracking_uri=uri, registry_uri=uri).set_registered_model_alias(
        "booleans", "champion", outcome.registered.version
    )
    settings = ServingSettings(
        sample_store_url=f"sqlite:///{root / 'samples.db'}",
        control_store_url=f"sqlite:///{root / 'control.db'}",
    )
    with ThreadedService(config, settings) as running:
        yield running, settings


def test_every_spelling_of_a_boolean_is_scored_as_that_boolean(served):
    service, settings = served
    records = [{"Member": value, "Spend": 12.5} for value in SPELLINGS]
    response = service.client.post(
        "/predict", json={"records": records}, headers={"X-Request-ID": "spellings"}
    )
    assert response.status_code == 200, response.text
    answered = response.json()["probabilities"]
    truth = {True: answered[0], False: answered[1]}
    assert truth[True] != truth[False]  # the feature matters to the model
    expected = [truth[value in (True, "true", "TRUE", 1)] for value in SPELLINGS]
    np.testing.assert_allclose(answered, expected, rtol=1e-6)
    stored = SqlSampleStore(settings.sample_store_url).read_window(
        pd.Timestamp("2000-01-01", tz="UTC"), pd.Timestamp("2100-01-01", tz="UTC")
    )
    stored = stored[stored.request_id == "spellings"].sort_values("record_index")
    assert stored["Member"].map(bool).tolist() == [
        value in (True, "true", "TRUE", 1) for value in SPELLINGS
    ]  # one encoding, whatever was sent


@pytest.mark.parametrize("value", ["yes", 2, 0.5, "t"])
def test_a_value_that_is_no_boolean_is_refused_naming_the_spellings(served, value):
    service, _ = served
    response = service.client.post(
        "/predict", content=json.dumps({"records": [{"Member": value, "Spend": 1.0}]}),
        headers={"Content-Type": "application/json"},
    )  # fmt: skip
    assert response.status_code == 422, response.text
    (error,) = response.json()["errors"]
    assert error["field"] == "Member"
    assert 'expected a boolean (true/false, "true"/"false" in any case, or 0/1)' in error["reason"]
