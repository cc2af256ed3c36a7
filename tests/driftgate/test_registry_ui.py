"""What the MLflow UI shows on model-version pages and in the runs compare view, read
back through the REST API of a real ``mlflow server`` after training and gating over HTTP.

One store for the module: three versions (weak, strong, bad) are trained and gated in
order — weak becomes the first champion, strong replaces it, bad fails — and each test
reads one aspect of the result the way the UI does, with plain HTTP requests.
"""

from __future__ import annotations

import httpx
import pytest

from driftgate import registry
from driftgate.config import load_config
from driftgate.gates.config import load_gate_config
from driftgate.jobs import promote as promote_job
from driftgate.jobs.train import run_training
from driftgate.training.evaluate import TASK_METRICS
from driftgate.training.train import TrainParams
from tests.conftest import MlflowServer, register_session_fit
from tests.driftgate.lenient_gates import LENIENT_GATES

MODEL = "ui-model"

TRAINING = {
    "weak": {"hidden_sizes": [8], "max_epochs": 3},
    "strong": {},
    "bad": {"hidden_sizes": [2], "max_epochs": 1, "lr": 1e-5, "seed": 3},
}


@pytest.fixture(scope="module")
def store(trained_model, tmp_path_factory):
    root = tmp_path_factory.mktemp("registry-ui")
    server = MlflowServer(root)
    server.start()
    try:
        (root / "driftgate.yaml").write_text(
            f"home: state\nmodel:\n  name: {MODEL}\ntracking:\n  uri: {server.uri}\n"
        )
        (root / "gates.yaml").write_text(LENIENT_GATES)
        config = load_config(root / "driftgate.yaml")
        gates = load_gate_config(root / "gates.yaml")
        versions, outcomes = {}, {}
        for name, params in TRAINING.items():
            config.train = TrainParams(**params)
            if params:
                versions[name] = run_training(config, on_epoch=None).registered.version
            else:  # the session's fit (the same data, parameters and seed), logged here
                versions[name] = register_session_fit(trained_model, config).registered.version
        for name in TRAINING:  # in order: weak is promoted first, then strong replaces it
            outcomes[name] = promote_job.run_promotion(
                config, gates, versions[name], root / "reports" / name
            )
        # Gating the champion again must replace its Gate paragraph, not add a second one.
        outcomes["strong-again"] = promote_job.run_promotion(
            config, gates, versions["strong"], root / "reports" / "strong-again"
        )
        with httpx.Client(base_url=f"{server.uri}/api/2.0/mlflow", timeout=30) as http:
            yield {"http": http, "versions": versions, "outcomes": outcomes}
    finally:
        server.stop()


def get(http: httpx.Client, endpoint: str, **params) -> dict:
    response = http.get(endpoint, params=params)
    assert response.status_code == 200, f"{endpoint}: {response.status_code} {response.text}"
    return response.json()


def model_version(store, name: str) -> dict:
    return get(store["http"], "/model-versions/get", name=MODEL, version=store["versions"][name])[
        "model_version"
    ]


def version_tags(version: dict) -> dict[str, str]:
    return {tag["key"]: tag["value"] for tag in version.get("tags", [])}


def run_of(store, name: str) -> dict:
    return get(store["http"], "/runs/get", run_id=model_version(store, name)["run_id"])["run"]


def test_the_outcomes_the_ui_is_checked_against(store):
    outcomes = store["outcomes"]
    assert outcomes["weak"].promoted and outcomes["strong"].promoted, outcomes["strong"].result
    assert not outcomes["bad"].promoted
    assert outcomes["strong-again"].result.passed


def test_champion_alias_points_at_the_promoted_version(store):
    versions = store["versions"]
    by_alias = get(store["http"], "/registered-models/alias", name=MODEL, alias="champion")
    assert by_alias["model_version"]["version"] == versions["strong"]
    assert "champion" in by_alias["model_version"]["aliases"]
    aliases = get(store["http"], "/registered-models/get", name=MODEL)["registered_model"][
        "aliases"
    ]
    assert {a["alias"]: a["version"] for a in aliases} == {
        "champion": versions["strong"],
        "previous-champion": versions["weak"],
    }


def test_description_says_what_was_trained_and_what_the_gate_decided(store):
    versions = store["versions"]
    strong = model_version(store, "strong")["description"]
    digest = version_tags(model_version(store, "strong"))[registry.TAG_DATA_DIGEST]
    training, *labelled = strong.split("\n\n")
    assert "training rows" in training and f"data digest {digest[:12]}" in training
    assert "val ROC AUC" in training
    assert [p.split(":**")[0] for p in labelled] == ["**Gate", "**Promotion"]  # re-gated: once
    assert labelled[0].startswith("**Gate:** passed ")
    assert "test_roc_auc " in labelled[0] and "gates/gate.md" in labelled[0]
    assert labelled[1].startswith("**Promotion:** promoted to `champion` ")
    assert labelled[1].endswith(f"replacing v{versions['weak']}.")
    assert model_version(store, "weak")["description"].endswith("the first champion.")

    bad = model_version(store, "bad")["description"]
    gate = bad.split("\n\n")[-1]
    assert gate.startswith("**Gate:** failed ")
    failed = version_tags(model_version(store, "bad"))[registry.TAG_GATE_FAILED_CHECKS]
    for check in failed.split(","):
        assert f"`{check}`" in gate
    assert f"Champion unchanged (v{versions['strong']})" in gate
    assert "**Promotion:**" not in bad


def test_gate_results_are_tags_on_the_version_and_on_its_run(store):
    for name, status in (("strong", "passed"), ("bad", "failed")):
        tags = version_tags(model_version(store, name))
        result = store["outcomes"][name if name != "strong" else "strong-again"].result
        assert tags[registry.TAG_GATE_STATUS] == status
        for check in result.checks:
            assert tags[registry.TAG_GATE_PREFIX + check.name].startswith(check.status + ": ")
        failing = {
            key.removeprefix(registry.TAG_GATE_PREFIX)
            for key, value in tags.items()
            if key.startswith(registry.TAG_GATE_PREFIX) and value.startswith("FAIL: ")
        }
        assert failing == ({c.name for c in result.failures})
        listed = tags[registry.TAG_GATE_FAILED_CHECKS]
        assert set(listed.split(",")) - {"-"} == failing
        run = run_of(store, name)
        assert tags[registry.TAG_GATE_REPORT] == f"runs:/{run['info']['run_id']}/gates/gate.md"
        run_tags = {t["key"]: t["value"] for t in run["data"]["tags"]}
        gate_tags = {k: v for k, v in tags.items() if k.startswith(registry.TAG_GATE_PREFIX)}
        assert {k: run_tags.get(k) for k in gate_tags} == gate_tags
        artifacts = get(
            store["http"], "/artifacts/list", run_id=run["info"]["run_id"], path="gates"
        )
        assert {f["path"] for f in artifacts["files"]} >= {"gates/gate.md", "gates/gate.json"}


def test_data_version_tags_match_the_runs_dataset_input(store):
    for name in TRAINING:
        tags = version_tags(model_version(store, name))
        inputs = run_of(store, name)["inputs"]["dataset_inputs"]
        digests = {i["dataset"]["digest"] for i in inputs if i["dataset"]["name"] == "train"}
        assert digests == {tags[registry.TAG_DATA_DIGEST]}
        # The gate's data_version check compared the same digest with the configured data.
        assert tags[registry.TAG_GATE_PREFIX + "data_version"].startswith(
            f"PASS: {tags[registry.TAG_DATA_DIGEST][:12]}"
        )


def test_metric_keys_line_up_across_runs_version_tags_and_gate_checks(store):
    splits = ("train", "val", "test")
    task_metrics = TASK_METRICS["binary"]  # the demo's task
    expected = {f"{split}_{metric}" for split in splits for metric in task_metrics}
    keys = {}
    for name in TRAINING:
        run = run_of(store, name)
        metrics = {m["key"]: m["value"] for m in run["data"]["metrics"]}
        keys[name] = set(metrics)
        assert expected <= keys[name]
        tags = version_tags(model_version(store, name))
        # The version page shows the same names as the run, and the gate re-measured
        # test_roc_auc under that name (pyfunc on the same rows: the same value).
        for key in expected:
            assert float(tags[key]) == pytest.approx(metrics[key], rel=1e-5)
        gate_observed = tags[registry.TAG_GATE_PREFIX + "test_roc_auc"].split()[1]
        assert float(gate_observed) == pytest.approx(metrics["test_roc_auc"], abs=1e-4)
    assert keys["weak"] == keys["strong"] == keys["bad"] == expected | {"train_loss", "val_loss"}
