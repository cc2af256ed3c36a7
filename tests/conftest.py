"""Shared fixtures: one project folder and one MLflow store per test session.

Registering a model costs seconds on a fresh SQLite store, so the trained-and-registered
model is built once and shared by every test that only reads it.
"""

from __future__ import annotations

import fcntl
import gc
import itertools
import re
import shutil
import sqlite3
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]


# -- the inner loop: `make check` runs what is not `integration` -------------------------
# A test is an integration test when it needs what takes seconds to set up: a trained
# and registered model, a server (MLflow, the service, PostgreSQL's stores), a Prefect
# flow run, a real CLI process, or the DVC pipeline. Folders whose every test does;
# fixtures that make one (a test reaching one through another fixture counts too); and
# modules that say so themselves (`pytestmark = pytest.mark.integration`: long
# simulations, CLI runs on a shared model).
#
# `make test` runs every test but the `serial` ones on two workers (`--dist loadfile`: a
# module's tests on one worker, so its fixtures are built once), then the `serial`
# modules alone: those that assert a recovery, a latency or a kill timing, which a
# second worker's load would make flaky. Each worker has its own session fixtures (its
# own project folder, MLflow store and trained model); PostgreSQL tests make a database
# of their own. A test that needs quiet to hold a time bound says so with
# `pytestmark = pytest.mark.serial` and why.
INTEGRATION_FOLDERS = ("driftgate", "serving", "flows", "infra", "examples")
INTEGRATION_MODULES = ("test_dvc_pipeline.py", "test_security.py", "test_mlflow_clients.py")
INTEGRATION_FIXTURES = frozenset(
    {"trained_model", "project_config", "project_dir", "registered", "mlflow_server"}
    | {"prefect_harness", "onnx_exported", "postgres_url"}
)
# The folders that may hold `serial` modules: the serial pass collects only these (a
# serial module elsewhere fails every run's collection, so none is silently left out).
SERIAL_FOLDERS = ("serving", "infra")


# -- what a `-m` expression can never select is not collected ---------------------------
# Collecting a module imports it, and the integration modules import torch, MLflow,
# Prefect and the service: about 21 CPU-s a process for the whole suite. `make check`
# (`-m "not ... integration"`) would deselect every test of an integration folder or
# module, and the serial pass (`-m "... serial"`) every test outside SERIAL_FOLDERS, so
# neither imports them.
def _never_selected(config, marks: dict[str, bool]) -> bool:
    """Whether ``-m`` is false for every test whose marks include (True) or lack
    (False) ``marks``, whatever its other marks."""
    from _pytest.mark.expression import Expression

    text = config.option.markexpr
    # Without an expression, or with a marker's keyword form (`integration(x=1)`, which
    # this check would read as the bare marker): collect, and let pytest select.
    if not text or re.search(r"\b(?!(?:not|and|or)\b)[A-Za-z_]\w*\s*\(", text):
        return False
    expression = Expression.compile(text)
    names = sorted(set(re.findall(r"[A-Za-z_]\w*", text)) - {"and", "or", "not"} - set(marks))
    for values in itertools.product((False, True), repeat=len(names)):
        given = {**dict(zip(names, values, strict=True)), **marks}
        if expression.evaluate(lambda name, /, marked=given, **_: marked.get(name, False)):
            return False
    return True


def pytest_ignore_collect(collection_path, config):
    tests = Path(__file__).parent
    if collection_path == tests or tests not in collection_path.parents:
        return None
    relative = collection_path.relative_to(tests)
    integration = relative.parts[0] in INTEGRATION_FOLDERS or relative.name in INTEGRATION_MODULES
    if integration and _never_selected(config, {"integration": True}):
        return True
    if relative.parts[0] not in SERIAL_FOLDERS and _never_selected(config, {"serial": False}):
        return True
    return None


# The longest modules, longest first (worker-seconds of one `make test` pass 1 under
# load, 7,850 in all). `make test` hands modules to its two workers in the order collected
# (`--no-loadscope-reorder`; xdist's default order is by number of tests, which put these
# modules of few but long tests last, one worker finishing alone for minutes): these
# first, then the other integration modules, then the unit tests, the shortest, last.
# Handed out greedily (xdist gives a worker the next module when it is almost idle), these
# figures make both workers finish within a small module of 3,925 s (half the total);
# with these ten last in any order, as by number of tests, 4,037 s typically and up to
# 4,303 s (2,000 random orders simulated, the other 3,595 s as 150 equal modules).
LONGEST_MODULES = (
    "monitors/test_alarm_calibration.py",  # 789
    "driftgate/test_retrain_job.py",  # 768
    "test_dvc_pipeline.py",  # 704
    "test_security.py",  # 402
    "flows/test_retrain_flow.py",  # 365
    "driftgate/test_registry_ui.py",  # 296
    "examples/test_churn.py",  # 244
    "driftgate/test_drift_check_job.py",  # 239
    "driftgate/test_promote_job.py",  # 229
    "examples/test_penguins.py",  # 219
)


def pytest_collection_modifyitems(config, items):
    tests = Path(__file__).parent
    rank = {}
    for item in items:
        relative = Path(item.fspath).relative_to(tests)
        if item.get_closest_marker("serial") and relative.parts[0] not in SERIAL_FOLDERS:
            raise pytest.UsageError(
                f"{relative}: a serial module outside SERIAL_FOLDERS {SERIAL_FOLDERS} "
                "(tests/conftest.py), which the serial pass would not collect"
            )
        if (
            relative.parts[0] in INTEGRATION_FOLDERS
            or relative.name in INTEGRATION_MODULES
            or INTEGRATION_FIXTURES & set(getattr(item, "fixturenames", ()))
        ):
            item.add_marker(pytest.mark.integration)
        module = relative.as_posix()
        if module in LONGEST_MODULES:
            rank[module] = min(rank.get(module, 0), LONGEST_MODULES.index(module) - 100)
        elif item.get_closest_marker("integration"):
            rank[module] = min(rank.get(module, 1), 0)  # a module with any, before units
        else:
            rank.setdefault(module, 1)
    # A stable sort: each module's tests keep their order (its fixtures assume it).
    items.sort(key=lambda item: rank[Path(item.fspath).relative_to(tests).as_posix()])


# -- one migrated MLflow store, copied --------------------------------------------------
# A new SQLite MLflow store runs every alembic migration when first opened: about 2.4 s
# of CPU (8-12 s of wall time on a loaded machine) each, and `make test` makes some 30.
# The migrated schema is built once per MLflow version under pytest's cache folder and
# copied (0.15 s) wherever a fixture makes a new store. Its experiments are deleted, so
# each copy creates its own `Default` experiment on first open, with the artifact root
# its opener resolves, exactly as a new store does; everything else is the schema
# MLflow's own migrations produced.
_template: Path | None = None
_cache_dir: Path | None = None


def pytest_configure(config):
    global _cache_dir
    cache = getattr(config, "cache", None)  # None under `-p no:cacheprovider`
    if cache is not None:
        _cache_dir = cache.mkdir("mlflow-store-template")


def mlflow_store_template() -> Path:
    """The migrated, empty MLflow SQLite store for the installed MLflow (built once; the
    lock keeps two workers from building it together)."""
    global _template
    if _template is not None and _template.is_file():
        return _template
    import mlflow
    from mlflow import MlflowClient

    # Without pytest's cache (`-p no:cacheprovider`): the system's temporary folder.
    folder = _cache_dir or Path(tempfile.gettempdir()) / "driftgate-mlflow-store-template"
    folder.mkdir(parents=True, exist_ok=True)
    template = folder / f"mlflow-{mlflow.__version__}.db"
    with open(folder / "build.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not template.is_file():
            building = folder / f"building-{template.name}"
            building.unlink(missing_ok=True)
            uri = f"sqlite:///{building}"
            MlflowClient(tracking_uri=uri, registry_uri=uri).search_experiments()
            with sqlite3.connect(building) as db:
                db.execute("DELETE FROM experiment_tags")
                db.execute("DELETE FROM experiments")
            db.close()
            building.replace(template)
    _template = template
    return template


def seed_mlflow_store(path: Path) -> str:
    """A new MLflow store at ``path`` (a copy of the migrated template; a store already
    there is kept); its ``sqlite:///`` URI."""
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(mlflow_store_template(), path)
    return f"sqlite:///{path}"


@pytest.fixture(autouse=True)
def _no_ambient_tracking_server(monkeypatch):
    """Tests use their own stores, never a server named by the environment.

    ``mlflow.set_tracking_uri`` / ``set_registry_uri`` also export ``MLFLOW_TRACKING_URI``
    / ``MLFLOW_REGISTRY_URI``, so without this a
    test that talked to a (since stopped) server would leak it into every config
    loaded after it.
    """
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.delenv("MLFLOW_REGISTRY_URI", raising=False)


@pytest.fixture(autouse=True)
def _python_collector_thresholds():
    """Python's collector thresholds after every test: a test that runs the CLI's entry
    point in this process (``driftgate.cli.main``) sets a command's (core/collector.py),
    which would otherwise stay for the rest of the worker's modules."""
    yield
    if gc.get_threshold() != _PYTHON_GC_THRESHOLDS:
        gc.set_threshold(*_PYTHON_GC_THRESHOLDS)


_PYTHON_GC_THRESHOLDS = gc.get_threshold()


@pytest.fixture(scope="session")
def project_dir(tmp_path_factory) -> Path:
    """A copy of the repository's config files in a temporary folder with its own home."""
    root = tmp_path_factory.mktemp("project")
    shutil.copy(REPO_ROOT / "params.yaml", root / "params.yaml")
    (root / "gates").mkdir()
    shutil.copy(REPO_ROOT / "gates" / "gates.yaml", root / "gates" / "gates.yaml")
    text = (REPO_ROOT / "driftgate.yaml").read_text()
    # The store is pinned so that no MLFLOW_TRACKING_URI in the environment can redirect it.
    text = text.replace("home: .driftgate", "home: state")
    uri = seed_mlflow_store(root / "state" / "mlflow.db")
    text = text.replace("  uri: null", f"  uri: {uri}")
    text = text.replace(
        "  artifact_location: null",
        f"  artifact_location: {(root / 'state' / 'mlartifacts').as_uri()}",
    )
    assert "uri: null" not in text and "artifact_location: null" not in text
    # No Evidently report per drift check (1-2 CPU-s each, and Evidently's 5 s import in
    # each worker): nothing a test of this project checks is in it, and nothing decided
    # depends on it. The modules that test the report turn it on for their checks.
    text = text.replace("monitoring:\n", "monitoring:\n  evidently_report: false\n", 1)
    assert "evidently_report: false" in text
    (root / "driftgate.yaml").write_text(text)
    return root


@pytest.fixture(scope="session")
def project_config(project_dir):
    from driftgate.config import load_config

    return load_config(project_dir / "driftgate.yaml")


class StepRecorder:
    """A job's step runner (:mod:`driftgate.jobs.steps`) that runs each step here and
    keeps its name and result, in the order the job ran them."""

    def __init__(self) -> None:
        self.steps: list[tuple[str, object]] = []

    def __call__(self, name, fn, /, *args, **kwargs):
        result = fn(*args, **kwargs)
        self.steps.append((name, result))
        return result

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(name for name, _ in self.steps)

    def result(self, name: str):
        (found,) = [result for step, result in self.steps if step == name]
        return found


@dataclass
class TrainedModel:
    config: object
    data: object
    result: object
    metrics: dict
    outcome: object
    aliases_after_registration: dict  # other tests later move aliases in this shared store
    steps: tuple[str, ...] = ()  # the training journey's steps, as it ran them
    # The version's tags as registration left them (other tests tag it later, e.g. an
    # accepted contract revision retags the champion).
    tags_after_registration: dict | None = None


@pytest.fixture(scope="session")
def trained_model(project_config) -> TrainedModel:
    """The training journey run once, keeping each step's result (the in-memory model
    for comparisons)."""
    from driftgate.jobs import train as job

    recorder = StepRecorder()
    outcome = job.run_training(project_config, on_epoch=None, run_step=recorder)
    data, result = recorder.result("prepare-data"), recorder.result("fit-model")
    metrics = recorder.result("evaluate-model")
    from mlflow import MlflowClient

    client = MlflowClient(
        tracking_uri=project_config.tracking.uri, registry_uri=project_config.tracking.uri
    )
    aliases = dict(client.get_registered_model(project_config.model.name).aliases)
    registered = outcome.registered
    tags = dict(client.get_model_version(registered.model_name, registered.version).tags)
    return TrainedModel(
        project_config, data, result, metrics, outcome, aliases, steps=recorder.names,
        tags_after_registration=tags,
    )  # fmt: skip


def register_session_model(trained_model: TrainedModel, name: str) -> str:
    """The session's trained version registered again under ``name`` in the session's
    store (its artifacts, run and registration tags) and made that model's champion: the
    version another training run on the session's config would register, without its
    ~20 CPU-s of training. For modules whose subject is what happens to a champion
    (drift checks, retrains), not how it was trained."""
    from driftgate import registry

    config = trained_model.config
    client = mlflow_client(config.tracking.uri)
    original = client.get_model_version(config.model.name, trained_model.outcome.registered.version)
    # Its source is a logged model (`models:/m-...`), which MLflow's registry looks up
    # through the process-wide tracking URI, not this client's (an earlier module on the
    # same worker may have left it on another store): name its artifacts instead.
    source = original.source
    if source.startswith("models:/m-"):
        source = client.get_logged_model(source.removeprefix("models:/")).artifact_location
    client.create_registered_model(name)
    tags = trained_model.tags_after_registration or {}
    version = client.create_model_version(name, source, run_id=original.run_id, tags=tags).version
    client.set_registered_model_alias(name, registry.CHAMPION_ALIAS, version)
    return str(version)


def register_session_fit(trained_model: TrainedModel, config, data=None):
    """The session's fitted model logged and registered in ``config``'s store (its own
    run, metrics, reference profile and version, as training registers them), in place
    of fitting the same model again (~15 CPU-s). Refused unless that fit would be this
    one: the same data (digest) and the same model spec (task, features, parameters
    and seed). ``data``: ``config``'s prepared data, when the caller has it."""
    from driftgate.jobs import train as job

    data = data if data is not None else job.prepare_data(config)
    session = trained_model.config, trained_model.data
    assert data.digest == trained_model.data.digest, "not the session's data: fit it"
    assert job.model_spec(config, data) == job.model_spec(*session), "not the session's model"
    metrics = job.evaluate_model(config, data, trained_model.result)
    return job.register_model(config, data, trained_model.result, metrics)


def mlflow_client(uri: str):
    """An MlflowClient whose registry is the same store as its tracking.

    ``MlflowClient(tracking_uri=X)`` alone takes its registry from MLflow's process-wide
    registry URI when one is set, and ``registry.use_store`` sets it for whichever store
    an earlier test used: registry calls would then go to that other store.
    """
    from mlflow import MlflowClient

    return MlflowClient(tracking_uri=uri, registry_uri=uri)


def retrains(config) -> list:
    """The retrains the project's retrain store holds for its model (monitor-started)."""
    from driftgate.stores.factories import retrain_store

    store = retrain_store(config)
    try:
        return store.list(config.model.name)
    finally:
        store.close()


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class MlflowServer:
    """A real ``mlflow server`` on loopback that a test can stop and start again."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.port = free_port()
        self.uri = f"http://127.0.0.1:{self.port}"
        self.process = None

    def start(self, timeout: float = 120.0) -> None:
        import os
        import subprocess
        import sys
        import time
        import urllib.request

        seed_mlflow_store(self.folder / "mlflow.db")
        command = [
            str(Path(sys.executable).with_name("mlflow")), "server",
            "--backend-store-uri", f"sqlite:///{self.folder / 'mlflow.db'}",
            "--artifacts-destination", (self.folder / "artifacts").as_uri(),
            "--host", "127.0.0.1", "--port", str(self.port), "--workers", "1",
        ]  # fmt: skip
        log = open(self.folder / "server.log", "ab")  # noqa: SIM115 - closed with the process
        self.process = subprocess.Popen(
            command, stdout=log, stderr=subprocess.STDOUT, env={**os.environ, "NO_COLOR": "1"}
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"mlflow server exited; see {self.folder / 'server.log'}")
            try:
                with urllib.request.urlopen(f"{self.uri}/health", timeout=1) as response:
                    if response.status == 200:
                        return
            except OSError:
                time.sleep(0.3)
        # Stopped here: a fixture whose start fails never reaches its own stop (one such
        # server, started under load, outlived its test run by 38 minutes).
        self.stop()
        raise TimeoutError(
            f"mlflow server not up after {timeout} s; see {self.folder / 'server.log'}"
        )

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=20)
            except Exception:
                self.process.kill()
                self.process.wait()
        self.process = None


@pytest.fixture
def mlflow_server(tmp_path):
    """Start a real MLflow tracking server for one test; always stopped afterwards."""
    server = MlflowServer(tmp_path)
    server.start()
    yield server
    server.stop()
