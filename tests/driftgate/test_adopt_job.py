"""``driftgate adopt`` on a real MLflow SQLite store, with models logged the way a team
that trains elsewhere logs them (``mlflow.pytorch.log_model``): what it refuses, with
which exit code and message, and that adopting twice changes nothing.

The CLI is driven through :func:`driftgate.cli.main` in this process (the exit code
and the one stderr line a user sees), the job directly where the outcome is asserted.
"""

from __future__ import annotations

import sys

import numpy as np
import pandas as pd
import pytest

from driftgate import registry
from driftgate.jobs import adopt as job
from tests.conftest import seed_mlflow_store

FEATURES = ["x0", "x1", "x2", "x3"]


def _model(logits: bool = False):
    import torch
    from torch import nn

    class External(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            torch.manual_seed(0)
            self.linear = nn.Linear(len(FEATURES), 1)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            out = self.linear(x).squeeze(-1) * 50.0
            return out if logits else torch.sigmoid(out / 50.0)

    return External().eval()


def _log(name: str, model, **kwargs) -> str:
    """Log ``model`` as a team would; returns the run id (and registers it as ``name``)."""
    import mlflow

    # Requirements given: MLflow would otherwise infer them by loading the model in a
    # child process (~2 CPU-s a model), which adoption never reads.
    kwargs.setdefault("pip_requirements", ["torch"])
    with mlflow.start_run() as run:
        mlflow.pytorch.log_model(
            model,
            name="model",
            input_example=np.zeros((3, len(FEATURES)), np.float32),
            registered_model_name=name,
            **kwargs,
        )
    return run.info.run_id


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    import mlflow

    from driftgate.config import load_config

    root = tmp_path_factory.mktemp("adopt-project")
    state = root / "state"
    rng = np.random.default_rng(0)
    frame = pd.DataFrame(rng.normal(size=(300, 4)), columns=FEATURES)
    frame["y"] = (frame["x0"] + 0.3 * rng.normal(size=300) > 0).astype(int)
    frame.to_csv(root / "reference.csv", index=False)
    frame.iloc[:150].to_csv(root / "other.csv", index=False)
    frame.assign(x4=1.0).to_csv(root / "wide.csv", index=False)
    frame.assign(x3="a").to_csv(root / "text.csv", index=False)
    (root / "driftgate.yaml").write_text(
        f"home: state\nmodel:\n  name: external\ntracking:\n"
        f"  uri: {seed_mlflow_store(state / 'mlflow.db')}\n"
        f"  artifact_location: {(state / 'mlartifacts').as_uri()}\n"
        "  experiment: elsewhere\ndata:\n  source: reference.csv\n  target: y\n"
    )
    config = load_config(root / "driftgate.yaml")
    registry.connect(config.tracking)  # the experiment, with artifacts under state/
    mlflow.set_experiment("elsewhere")
    runs = {
        "good": _log("external", _model()),  # v1
        "logits": _log("external", _model(logits=True)),  # v2
        "pickled": _log("external", _model(), serialization_format="pickle"),  # v3
        "unregistered": _log(None, _model()),
    }
    return {"root": root, "config": config, "runs": runs}


def run_cli(monkeypatch, capsys, *args: str) -> tuple[int, str]:
    from driftgate.cli import main

    monkeypatch.setattr(sys, "argv", ["driftgate", *args])
    with pytest.raises(SystemExit) as exited:
        main()
    return exited.value.code, capsys.readouterr().err


def adopt_cli(monkeypatch, capsys, store, uri: str, reference: str = "reference.csv"):
    config_file = str(store["root"] / "driftgate.yaml")
    reference_file = str(store["root"] / reference)
    return run_cli(monkeypatch, capsys, "adopt", uri, "-r", reference_file, "-c", config_file)


def tags_of(store, version: str) -> dict:
    from mlflow import MlflowClient

    uri = store["config"].tracking.uri
    return dict(MlflowClient(tracking_uri=uri, registry_uri=uri).get_model_version(
        "external", version).tags)  # fmt: skip


@pytest.mark.parametrize(
    ("reference", "named"),
    [
        ("wide.csv", "takes 4 float32 columns; "),  # one column too many
        ("text.csv", "column(s) ['x3'] are not numeric"),
    ],
)
def test_a_signature_mismatch_is_exit_2_naming_the_columns(
    store, monkeypatch, capsys, reference, named
):
    code, err = adopt_cli(monkeypatch, capsys, store, "models:/external/1", reference)
    assert code == 2
    assert err.startswith("error: ") and named in err and "Traceback" not in err
    if reference == "wide.csv":
        assert "'x4'" in err
    assert registry.TAG_ADOPTED not in tags_of(store, "1")


@pytest.mark.parametrize(
    ("uri", "message"),
    [
        ("models:/external/99", "models:/external/99: no such registered model version"),
        ("models:/nobody/1", "models:/nobody/1: no such registered model version"),
        ("runs:/0123456789abcdef0123456789abcdef/model", "no such run"),
        ("models:/external@champion", "expected models:/NAME/VERSION or runs:/RUN_ID/PATH"),
    ],
)
def test_an_unknown_version_run_or_uri_is_exit_2(store, monkeypatch, capsys, uri, message):
    code, err = adopt_cli(monkeypatch, capsys, store, uri)
    assert code == 2, err
    assert message in err and "Traceback" not in err


def test_a_model_the_allow_list_refuses_is_exit_3_and_nothing_is_tagged(store, monkeypatch, capsys):
    code, err = adopt_cli(monkeypatch, capsys, store, "models:/external/3")
    assert code == 3
    assert err.startswith("registry error: models:/external/3: refusing to load a pickled model")
    tags = tags_of(store, "3")
    assert registry.TAG_ADOPTED not in tags and registry.TAG_REGISTRATION not in tags


def test_a_model_returning_logits_is_exit_2(store, monkeypatch, capsys):
    code, err = adopt_cli(monkeypatch, capsys, store, "models:/external/2")
    assert code == 2
    assert "returned values outside [0, 1]" in err and "apply a sigmoid" in err


def test_adopting_twice_changes_nothing_and_other_reference_data_is_refused(store):
    from mlflow import MlflowClient

    config = store["config"]
    first = job.run_adoption(config, "models:/external/1", store["root"] / "reference.csv")
    assert first.changed and first.features == FEATURES
    assert set(first.metrics) == {"reference_accuracy", "reference_roc_auc", "reference_log_loss"}
    client = MlflowClient(tracking_uri=config.tracking.uri, registry_uri=config.tracking.uri)
    tags = tags_of(store, "1")
    assert tags[registry.TAG_ADOPTED] == "true" and registry.is_complete(tags)
    artifacts = sorted(a.path for a in client.list_artifacts(first.run_id))
    assert {"data_contract", "reference_profile"} <= set(artifacts)
    description = client.get_model_version("external", "1").description
    from driftgate.monitors.profile import ReferenceProfile

    folder = registry.download_reference_profile(
        config.tracking, "external", "1", store["root"] / "profile-1"
    )
    outputs = ReferenceProfile.load(folder).outputs  # the output monitors' reference
    assert outputs.task == "binary" and outputs.split == "reference"
    assert outputs.realized["accuracy"] == pytest.approx(first.metrics["reference_accuracy"])

    second = job.run_adoption(config, "models:/external/1", store["root"] / "reference.csv")
    assert not second.changed and second.features == FEATURES
    assert tags_of(store, "1") == tags
    assert sorted(a.path for a in client.list_artifacts(first.run_id)) == artifacts
    assert client.get_model_version("external", "1").description == description

    with pytest.raises(job.AdoptionError, match="adopted before with other reference data"):
        job.run_adoption(config, "models:/external/1", store["root"] / "other.csv")
    assert tags_of(store, "1") == tags


def test_a_run_uri_is_registered_once_then_adopted(store):
    config = store["config"]
    uri = f"runs:/{store['runs']['unregistered']}/model"
    first = job.run_adoption(config, uri, store["root"] / "reference.csv")
    assert first.registered_from == uri and first.version == "4"
    again = job.run_adoption(config, uri, store["root"] / "reference.csv")
    assert again.version == "4" and not again.changed


def test_a_version_driftgate_trained_is_not_adopted(store):
    config = store["config"]
    version = registry.register_run_model(
        config.tracking, f"runs:/{store['runs']['good']}/model", "trained-here"
    )
    registry.tag_model_version(
        config.tracking, "trained-here", version, {registry.TAG_REGISTRATION: "complete"}
    )
    with pytest.raises(job.AdoptionError, match="trained and registered by driftgate"):
        job.run_adoption(config, f"models:/trained-here/{version}", store["root"] / "reference.csv")


def test_a_run_without_a_model_at_that_path_is_exit_2(store, monkeypatch, capsys):
    uri = f"runs:/{store['runs']['unregistered']}/elsewhere"
    code, err = adopt_cli(monkeypatch, capsys, store, uri)
    assert code == 2
    assert f"{uri}: the run logged no model named 'elsewhere'" in err
