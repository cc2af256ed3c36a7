"""Security properties of driftgate that need no running service.

- the admin token is compared with ``hmac.compare_digest`` (a source-level guard; the
  behaviour over HTTP is in tests/serving/test_security_http.py);
- nothing in the project's own packages unpickles: no ``pickle.load``, every
  ``torch.load`` has ``weights_only=True``, no ``allow_pickle=True``, and the one
  place that loads registered models refuses a pickled one before reading it;
- secrets (store passwords, webhook tokens, the admin token, tracking credentials)
  never reach MLflow params, tags, descriptions or artifacts, log records, CLI output
  or error messages;
- names that become parts of paths (model name, candidate version) cannot hold one.
"""

from __future__ import annotations

import ast
import contextlib
import logging
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from driftgate.core.yamlconfig import ConfigError
from tests.conftest import REPO_ROOT, seed_mlflow_store

PACKAGES = ("driftgate", "serving", "training", "monitors", "gates", "data_contracts", "flows")
PASSWORD = "Pw-s3cr3t-4f9e"  # recognisable: any trace of it in output is a leak
WEBHOOK_TOKEN = "hook-t0ken-77c1"
ADMIN_TOKEN = "admin-t0ken-d2b8"
TRACKING_TOKEN = "mlflow-t0ken-90aa"
SECRETS = (PASSWORD, WEBHOOK_TOKEN, ADMIN_TOKEN, TRACKING_TOKEN)


def _sources() -> list[Path]:
    return sorted(p for package in PACKAGES for p in (REPO_ROOT / package).rglob("*.py"))


def assert_no_secret(text: str, where: str) -> None:
    for secret in SECRETS:
        assert secret not in text, f"{where} contains a secret: ...{_around(text, secret)}..."


def _around(text: str, secret: str) -> str:
    at = text.index(secret)
    return text[max(0, at - 120) : at + 40]


# -- the admin token -----------------------------------------------------------------


def test_admin_token_is_compared_with_compare_digest_only():
    # The admin dependency of every /admin route (serving/routers/admin.py uses it).
    tree = ast.parse((REPO_ROOT / "serving" / "dependencies.py").read_text())
    (check,) = [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == "require_admin"
    ]
    calls = [ast.unparse(n.func) for n in ast.walk(check) if isinstance(n, ast.Call)]
    assert "hmac.compare_digest" in calls
    # No ==, !=, startswith, in ... between the token and the expected value: those
    # return as soon as a character differs, so their time leaks the matching prefix.
    for node in ast.walk(check):
        if isinstance(node, ast.Compare):
            names = {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}
            assert not names & {"token", "expected"} or all(
                isinstance(op, ast.Is | ast.IsNot) for op in node.ops
            ), ast.unparse(node)
    assert not {"startswith", "endswith", "find", "index"} & {c.rsplit(".", 1)[-1] for c in calls}


# -- no pickle -----------------------------------------------------------------------

UNSAFE = [
    (re.compile(r"\bpickle\.loads?\("), "pickle.load"),
    (re.compile(r"\b(cloudpickle|dill|joblib|shelve|marshal)\.load"), "pickle-family load"),
    (re.compile(r"\bread_pickle\("), "pandas.read_pickle"),
    (re.compile(r"allow_pickle\s*=\s*True"), "allow_pickle=True"),
    (re.compile(r"\bmlflow\.pytorch\.load_model\("), "mlflow.pytorch.load_model"),
    (re.compile(r"\byaml\.(load|unsafe_load|full_load)\("), "unsafe yaml load"),
]


def test_project_code_loads_no_pickle():
    """A guard: the patterns that deserialise code are absent from every package, each
    ``torch.load`` passes ``weights_only=True``, and pyfunc loads happen only in
    ``registry.load_pyfunc`` (which refuses pickled models)."""
    found = []
    for path in _sources():
        text = path.read_text()
        name = path.relative_to(REPO_ROOT)
        found += [f"{name}: {label}" for pattern, label in UNSAFE if pattern.search(text)]
        for node in ast.walk(ast.parse(text)):
            if not isinstance(node, ast.Call):
                continue
            call = ast.unparse(node.func)
            keywords = {k.arg: ast.unparse(k.value) for k in node.keywords}
            if call.endswith("torch.load") and keywords.get("weights_only") != "True":
                found.append(f"{name}:{node.lineno}: {ast.unparse(node)}")
            if call.endswith("pyfunc.load_model") and name != Path("driftgate/registry/loading.py"):
                found.append(f"{name}:{node.lineno}: pyfunc load outside registry.load_pyfunc")
            if call.endswith("pytorch.log_model") and keywords.get("serialization_format") != (
                "'pt2'"
            ):
                found.append(f"{name}:{node.lineno}: log_model without serialization_format='pt2'")
    assert not found, "\n".join(found)
    assert any("torch.load" in p.read_text() for p in _sources())  # the scan sees them


def _touch(path: str) -> None:
    Path(path).write_text("unpickled")


class _Booby:
    """Unpickling this calls ``_touch``: what a malicious model file would do."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (_touch, (str(self.marker),))


def test_a_pickled_model_in_the_registry_is_refused_before_it_is_unpickled(tmp_path):
    import mlflow
    import torch

    from driftgate import registry
    from driftgate.config import TrackingSettings

    class Module(torch.nn.Module):
        def __init__(self, marker):
            super().__init__()
            self.booby = _Booby(marker)

        def forward(self, x):
            return x

        def __reduce_ex__(self, protocol):
            return self.booby.__reduce__()

    marker = tmp_path / "code-ran"
    tracking = TrackingSettings(
        uri=seed_mlflow_store(tmp_path / "mlflow.db"),
        artifact_location=(tmp_path / "artifacts").as_uri(),
        experiment="pickled",
    )
    experiment_id = registry.connect(tracking)  # its artifacts under tmp_path, not ./mlruns
    with mlflow.start_run(experiment_id=experiment_id):
        mlflow.pytorch.log_model(
            Module(marker),
            name="model",
            registered_model_name="pickled",
            serialization_format="pickle",
            pip_requirements=["torch"],
        )
    assert not marker.exists()
    with pytest.raises(registry.RegistryError, match="refusing to load a pickled model"):
        registry.load_pyfunc(tracking, "models:/pickled/1")
    assert not marker.exists(), "the pickle was deserialised"
    # The control: MLflow itself would have run the pickle's code.
    with contextlib.suppress(Exception):
        mlflow.pyfunc.load_model("models:/pickled/1")
    assert marker.read_text() == "unpickled"


# -- secrets -------------------------------------------------------------------------


@pytest.fixture
def secret_project(tmp_path, monkeypatch):
    """A project whose config and environment carry every kind of secret."""
    root = tmp_path / "project"
    root.mkdir()
    state = root / "state"
    (root / "driftgate.yaml").write_text(
        f"home: state\nmodel: {{name: secret-model}}\n"
        f"tracking: {{uri: '{seed_mlflow_store(state / 'mlflow.db')}', "
        f"artifact_location: '{(state / 'artifacts').as_uri()}'}}\n"
        f"serving:\n  sample_store_url: postgresql://driftgate:{PASSWORD}@db.internal/samples\n"
        f"monitoring:\n  webhook_url: https://hooks.example/services/{WEBHOOK_TOKEN}\n"
        f"  review_store_url: postgresql://driftgate:{PASSWORD}@db.internal/reviews\n"
    )
    monkeypatch.setenv(
        "DRIFTGATE__SERVING__CONTROL_STORE_URL",
        f"postgresql://driftgate:{PASSWORD}@db.internal/control",
    )
    monkeypatch.setenv("DRIFTGATE_ADMIN_TOKEN", ADMIN_TOKEN)
    monkeypatch.setenv("DRIFTGATE_WEBHOOK_URL", f"https://hooks.example/{WEBHOOK_TOKEN}")
    return root


def test_a_training_run_records_no_secret(trained_model, secret_project, caplog, capsys):
    """The registration step of ``driftgate train`` under a config full of secrets:
    nothing of them in the run's params and tags, the version's tags and description,
    any artifact, or the log."""
    from mlflow import MlflowClient
    from mlflow.artifacts import download_artifacts

    from driftgate.config import load_config
    from driftgate.jobs import train as job

    caplog.set_level(logging.DEBUG)
    config = load_config(secret_project / "driftgate.yaml")
    assert PASSWORD in config.serving.control_store_url  # the secrets are really there
    outcome = job.register_model(
        config, trained_model.data, trained_model.result, trained_model.metrics
    )
    client = MlflowClient(tracking_uri=config.tracking.uri, registry_uri=config.tracking.uri)
    run = client.get_run(outcome.registered.run_id)
    version = client.get_model_version(config.model.name, outcome.registered.version)
    recorded = [
        repr(run.data.params),
        repr(run.data.tags),
        repr(version.tags),
        version.description or "",
        repr(client.get_registered_model(config.model.name).tags),
    ]
    assert run.data.params["data_source"] and len(run.data.params) > 10
    folder = Path(
        download_artifacts(
            run_id=run.info.run_id,
            dst_path=str(secret_project / "downloaded"),
            tracking_uri=config.tracking.uri,
        )
    )
    files = [p for p in folder.rglob("*") if p.is_file()]
    assert any(p.name == "environment.json" for p in files)
    for path in files:
        recorded.append(path.read_bytes().decode("utf-8", "replace"))
    assert_no_secret("\n".join(recorded), "the MLflow run and version")
    assert_no_secret(caplog.text, "the log")
    captured = capsys.readouterr()
    assert_no_secret(captured.out + captured.err, "stdout/stderr")


def test_messages_about_credentialled_urls_are_redacted(tmp_path, monkeypatch):
    from driftgate import registry
    from driftgate.config import TrackingSettings
    from driftgate.core.redaction import redact_credentials
    from driftgate.stores import StoreError
    from driftgate.stores.samples import SqlSampleStore

    text = f"API request to http://alice:{TRACKING_TOKEN}@mlflow:5000/api failed"
    assert redact_credentials(text) == "API request to http://***@mlflow:5000/api failed"
    assert redact_credentials(f"postgresql://u:{PASSWORD}@@h/db") == "postgresql://***@h/db"
    assert redact_credentials("sqlite:////tmp/a@b/x.db") == "sqlite:////tmp/a@b/x.db"

    # MLflow quotes the tracking URI, credentials included, in its errors.
    error = registry.RegistryError(text)
    assert TRACKING_TOKEN not in str(error)
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_TIMEOUT", "5")
    tracking = TrackingSettings(uri=f"http://alice:{TRACKING_TOKEN}@127.0.0.1:1")
    with pytest.raises(registry.RegistryError) as raised:
        registry.latest_version(tracking, "m")
    assert "127.0.0.1:1" in str(raised.value)
    assert_no_secret(str(raised.value), "a RegistryError")

    # Store URLs: unparseable, unsupported, unreachable; never a raw driver error.
    for url in (
        f"postgresql://u:{PASSWORD}@h:notaport/db",
        f"postgresql//u:{PASSWORD}@h/db",
        f"mysql://u:{PASSWORD}@h/db",
        f"postgresql://u:{PASSWORD}@127.0.0.1:1/db?connect_timeout=2",
        f"sqlite:///{tmp_path}/a\x00b.db",
    ):
        with pytest.raises(StoreError) as raised:
            SqlSampleStore(url)
        assert_no_secret(str(raised.value), f"the StoreError for {url[:12]}")


def test_the_demo_summary_prints_no_tracking_credentials(tmp_path, capsys):
    from driftgate.cli import _print_where_to_look
    from driftgate.config import load_config

    (tmp_path / "driftgate.yaml").write_text(
        f"tracking: {{uri: 'https://alice:{TRACKING_TOKEN}@mlflow.internal'}}\n"
    )
    _print_where_to_look(load_config(tmp_path / "driftgate.yaml"))
    out = capsys.readouterr().out
    assert "https://***@mlflow.internal" in out
    assert_no_secret(out, "the demo summary")


def _driftgate(
    *args: str, env: dict, cwd: Path, timeout: float = 120
) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(Path(sys.executable).with_name("driftgate")), *args],
        env={**os.environ, **env},
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def test_cli_errors_about_a_store_show_neither_password_nor_traceback(tmp_path):
    """``driftgate pause`` on an unreachable PostgreSQL store (a password in the URL)
    used to print the raw SQLAlchemy traceback with exit code 1 ("a check failed")."""
    (tmp_path / "driftgate.yaml").write_text("home: state\n")
    env = {"DRIFTGATE__SERVING__CONTROL_STORE_URL": f"postgresql://u:{PASSWORD}@127.0.0.1:1/db"}
    done = _driftgate("pause", "--reason", "x", "-c", "driftgate.yaml", env=env, cwd=tmp_path)
    assert done.returncode == 3, done.stderr[-2000:]
    assert "Traceback" not in done.stderr
    assert "store error: cannot open control store postgresql://u:***@127.0.0.1:1/db" in (
        done.stderr
    )
    assert_no_secret(done.stdout + done.stderr, "driftgate pause")


def test_a_password_in_a_store_url_query_is_masked_in_the_store_error(tmp_path):
    """libpq takes ``?password=`` as well as ``user:password@``; SQLAlchemy's own
    masking only knows the latter, so the store error used to print the URL whole."""
    (tmp_path / "driftgate.yaml").write_text("home: state\n")
    url = f"postgresql://u@127.0.0.1:1/db?sslmode=disable&password={PASSWORD}&connect_timeout=2"
    env = {"DRIFTGATE__SERVING__CONTROL_STORE_URL": url}
    done = _driftgate("pause", "--reason", "x", "-c", "driftgate.yaml", env=env, cwd=tmp_path)
    assert done.returncode == 3, done.stderr[-2000:]
    assert "Traceback" not in done.stderr
    assert "store error: cannot open control store postgresql://" in done.stderr
    assert "password=***" in done.stderr
    assert_no_secret(done.stdout + done.stderr, "driftgate pause")


@pytest.fixture(scope="module")
def credentialled_tracking(tmp_path_factory):
    """A real MLflow server reached through ``http://alice:PASSWORD@...`` (the server
    ignores the credentials; the client sends them and prints the URL it was given)."""
    from tests.conftest import MlflowServer

    server = MlflowServer(tmp_path_factory.mktemp("credentialled-mlflow"))
    server.start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def credentialled_project(credentialled_tracking, tmp_path_factory):
    root = tmp_path_factory.mktemp("credentialled-project")
    (root / "gates").mkdir()
    (root / "gates" / "gates.yaml").write_text((REPO_ROOT / "gates" / "gates.yaml").read_text())
    params = yaml.safe_load((REPO_ROOT / "params.yaml").read_text())
    params["train"]["max_epochs"] = 3  # the run's output is under test, not the model
    (root / "params.yaml").write_text(yaml.safe_dump(params))
    tracking = credentialled_tracking.uri.replace("http://", f"http://alice:{PASSWORD}@")
    (root / "driftgate.yaml").write_text(
        f"home: state\nmodel: {{name: credentialled}}\ntracking: {{uri: '{tracking}'}}\n"
        f"serving: {{sample_store_url: 'sqlite:///{root / 'samples.db'}'}}\n"
    )
    return root


def _state_files(root: Path) -> str:
    """Every report and log file the commands wrote under the project's home."""
    texts = []
    for path in sorted((root / "state").rglob("*")):
        if path.is_file() and path.suffix in (".md", ".json", ".xml", ".html", ".log", ".txt"):
            texts.append(f"== {path}\n" + path.read_text(errors="replace"))
    return "\n".join(texts)


def test_train_verbose_prints_no_tracking_credentials(credentialled_project):
    """``train -v`` used to print MLflow's "🏃 View run ... at: http://alice:PASSWORD@..."
    (MLflow writes it to stdout for every run on a tracking server)."""
    done = _driftgate(
        "train", "-v", "-c", "driftgate.yaml", env={}, cwd=credentialled_project, timeout=600
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Registered models:/credentialled/1" in done.stdout
    assert " DEBUG " in done.stderr  # verbose: the libraries' debug records were written
    assert_no_secret(done.stdout, "train -v stdout")
    assert_no_secret(done.stderr, "train -v stderr")
    assert_no_secret(_state_files(credentialled_project), "files written by train")


def test_drift_check_prints_and_writes_no_tracking_credentials(credentialled_project):
    """``drift-check`` (without -v) logs a monitoring run: MLflow printed its URL with
    the credentials."""
    import pandas as pd
    from mlflow import MlflowClient

    from driftgate import registry
    from driftgate.config import load_config
    from driftgate.jobs.train import prepare_data
    from driftgate.stores.samples import Sample, SqlSampleStore

    config = load_config(credentialled_project / "driftgate.yaml")
    client = MlflowClient(tracking_uri=config.tracking.uri, registry_uri=config.tracking.uri)
    version = str(  # the one registered by train
        max(int(v.version) for v in client.search_model_versions("name = 'credentialled'"))
    )
    client.set_registered_model_alias("credentialled", registry.CHAMPION_ALIAS, version)
    data = prepare_data(config)
    start = pd.Timestamp("2030-01-01", tz="UTC")
    store = SqlSampleStore(config.serving.sample_store(config.home_dir))
    store.append(
        [
            Sample(
                timestamp=start + pd.Timedelta(minutes=i),
                request_id=f"r{i}",
                record_index=0,
                model_name="credentialled",
                model_version=version,
                features={f: float(row[f]) for f in data.features},
                prediction=0.5,
                predicted_class=1,
            )
            for i, (_, row) in enumerate(data.splits.production.iloc[:400].iterrows())
        ]
    )
    store.close()
    done = _driftgate(
        "drift-check", "--end", "2030-01-02", "--window", "1d", "-c", "driftgate.yaml",
        env={}, cwd=credentialled_project, timeout=300,
    )  # fmt: skip
    assert done.returncode in (0, 1), done.stderr[-3000:]
    assert "report: " in done.stdout  # a window was judged and its run logged
    assert_no_secret(done.stdout, "drift-check stdout")
    assert_no_secret(done.stderr, "drift-check stderr")
    # The Evidently report renders in a background process after the verdict (issue
    # 32): its files, its log and its MLflow upload are checked too, once it ended.
    [log] = (credentialled_project / "state").rglob("evidently.log")
    deadline = time.monotonic() + 300
    while "report: " not in log.read_text() and time.monotonic() < deadline:
        time.sleep(0.5)
    assert "report: " in log.read_text(), log.read_text()[-3000:]
    written = _state_files(credentialled_project)
    assert "evidently.html" in written
    assert "summary.md" in written
    assert_no_secret(written, "files written by drift-check")


# -- names that become paths ---------------------------------------------------------


@pytest.mark.parametrize("name", ["../../etc/evil", "a/b", "/abs", "..\\x", "x\x00", ""])
def test_a_model_name_cannot_hold_a_path(tmp_path, name):
    """``model.name`` names folders (``reports/promote-NAME-vN``, ``profiles/NAME-vN``);
    the ``--model`` option used to bypass the config's validation."""
    from driftgate.config import load_config, with_model_name

    config = load_config(None)
    if name:
        with pytest.raises(ConfigError, match=r"^--model: name: "):
            with_model_name(config, name)
    (tmp_path / "driftgate.yaml").write_text(yaml.safe_dump({"model": {"name": name}}))
    with pytest.raises(ConfigError, match=r"model\.name"):
        load_config(tmp_path / "driftgate.yaml")


def test_cli_model_option_with_a_path_is_refused(tmp_path):
    (tmp_path / "driftgate.yaml").write_text("home: state\n")
    done = _driftgate(
        "pause", "--reason", "x", "--model", "../../escape", "-c", "driftgate.yaml",
        env={}, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert "--model: name: String should match pattern" in done.stderr
    assert not (tmp_path / "state").exists()  # refused before any store was opened


@pytest.mark.parametrize("candidate", ["1/../../../tmp/x", "../1", "1 ", "²", "-1", "v1"])
def test_a_candidate_version_cannot_hold_a_path(project_config, candidate):
    from driftgate.gates.config import load_gate_config
    from driftgate.jobs.promote import evaluate_gates

    with pytest.raises(ConfigError, match="a model version is a whole number"):
        evaluate_gates(project_config, load_gate_config(), candidate)


def test_a_candidate_file_version_cannot_hold_a_path(tmp_path):
    import json

    from driftgate.jobs.pipeline import CANDIDATE_FIELDS, read_candidate_file
    from driftgate.training.data import DataError

    record = dict.fromkeys(CANDIDATE_FIELDS, "x") | {"version": "../../x"}
    (tmp_path / "candidate.json").write_text(json.dumps(record))
    with pytest.raises(DataError, match="not a model version number"):
        read_candidate_file(tmp_path / "candidate.json")
