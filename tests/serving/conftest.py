"""Fixtures for the service tests: a real MLflow SQLite store with two registered
versions, and a real uvicorn server on a free loopback port.

Two versions (different seeds, a couple of epochs each) are enough to prove the
service follows the ``champion`` alias; the tests move the alias themselves, as the
promotion gate would.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import httpx
import numpy as np
import pytest

from tests.conftest import free_port, seed_mlflow_store
from tests.driftgate.stores.conftest import _postgres_database

ADMIN_TOKEN = "test-admin-token-7f3a"
REPO_ROOT = Path(__file__).resolve().parents[2]


@dataclass
class Registered:
    config: object
    versions: dict  # version -> in-memory torch model
    features: list
    rows: object  # a frame of test-split rows (features only)

    def set_champion(self, version: str) -> None:
        from mlflow import MlflowClient

        # registry_uri too: without it the client uses the process-wide registry URI,
        # which another test may have pointed at its own store.
        uri = self.config.tracking.uri
        client = MlflowClient(tracking_uri=uri, registry_uri=uri)
        client.set_registered_model_alias(self.config.model.name, "champion", version)

    def expected(self, version: str, records: list[dict]) -> np.ndarray:
        from driftgate.training.model import predict_proba

        matrix = np.array([[r[f] for f in self.features] for r in records], dtype=np.float32)
        return predict_proba(self.versions[version], matrix)


@pytest.fixture(scope="session")
def registered(tmp_path_factory) -> Registered:
    """Two versions of a small model in a fresh MLflow store; champion -> v1."""
    from driftgate.config import load_config
    from driftgate.jobs import train as job
    from driftgate.training.params import TrainParams

    root = tmp_path_factory.mktemp("serving-project")
    # The store is pinned: no MLFLOW_TRACKING_URI in the environment can redirect it.
    state = root / "state"
    (root / "driftgate.yaml").write_text(
        "home: state\nmodel:\n  name: served\ntracking:\n"
        f"  uri: {seed_mlflow_store(state / 'mlflow.db')}\n"
        f"  artifact_location: {(state / 'mlartifacts').as_uri()}\n"
    )
    config = load_config(root / "driftgate.yaml")
    data = job.prepare_data(config)
    versions = {}
    for seed in (1, 2):
        config.train = TrainParams(seed=seed, max_epochs=2, patience=2)
        result = job.fit_model(config, data, on_epoch=None)
        metrics = job.evaluate_model(config, data, result)
        outcome = job.register_model(config, data, result, metrics)
        versions[outcome.registered.version] = result.model
    registered = Registered(
        config=config,
        versions=versions,
        features=list(data.features),
        rows=data.splits.test[list(data.features)].reset_index(drop=True),
    )
    registered.set_champion("1")
    return registered


@pytest.fixture(params=["sqlite", "postgresql"])
def sample_url(request, tmp_path):
    """The service's sample store on each back end: a SQLite file, or a throw-away
    database on the real PostgreSQL server (dropped after the test). Tests narrow it
    with ``@pytest.mark.parametrize("sample_url", [...], indirect=True)``."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'samples.db'}"
    else:
        yield from _postgres_database()


def local_settings(folder: Path, **overrides):
    """Service settings with the sample and control stores in SQLite files in ``folder``."""
    from driftgate.config.serving import ServingSettings

    return ServingSettings(
        sample_store_url=f"sqlite:///{folder / 'samples.db'}",
        control_store_url=f"sqlite:///{folder / 'control.db'}",
        **overrides,
    )


@contextlib.contextmanager
def admin_token_env(token: str | None = ADMIN_TOKEN):
    previous = os.environ.get("DRIFTGATE_ADMIN_TOKEN")
    if token is None:
        os.environ.pop("DRIFTGATE_ADMIN_TOKEN", None)
    else:
        os.environ["DRIFTGATE_ADMIN_TOKEN"] = token
    try:
        yield
    finally:
        if previous is None:
            os.environ.pop("DRIFTGATE_ADMIN_TOKEN", None)
        else:
            os.environ["DRIFTGATE_ADMIN_TOKEN"] = previous


class ThreadedService:
    """``create_app`` under a real uvicorn server in a thread, on a free port."""

    def __init__(self, config, settings) -> None:
        import uvicorn

        from driftgate.serving.app import create_app
        from driftgate.serving.server import uvicorn_limits

        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.app = create_app(config, settings)
        self.server = uvicorn.Server(
            uvicorn.Config(
                self.app, host="127.0.0.1", port=self.port, log_level="warning", **uvicorn_limits()
            )
        )
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> ThreadedService:
        with admin_token_env():
            self.thread.start()
            deadline = time.monotonic() + 60
            while not self.server.started:
                if not self.thread.is_alive() or time.monotonic() > deadline:
                    raise RuntimeError("uvicorn did not start")
                time.sleep(0.02)
        self.client = httpx.Client(base_url=self.url, timeout=30)
        return self

    def __exit__(self, *exc) -> None:
        self.client.close()
        self.server.should_exit = True
        self.thread.join(timeout=30)

    @property
    def state(self):
        return self.app.state.service


def records_of(frame, start: int, count: int) -> list[dict]:
    return [
        {k: float(v) for k, v in row.items()}
        for row in frame.iloc[start : start + count].to_dict("records")
    ]


def wait_for(condition, timeout: float = 10.0, what: str = "condition"):
    """Poll ``condition`` every 50 ms until it returns something truthy; return it."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if value := condition():
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")


def admin_headers(token: str = ADMIN_TOKEN) -> dict:
    return {"Authorization": f"Bearer {token}"}


@pytest.fixture(scope="session")
def onnx_exported(registered, tmp_path_factory) -> str:
    """v1 of ``registered`` with its ONNX model on its run, as the gate logs it: exported
    once per session by the export_parity check (seconds) and uploaded by the registry.
    v2 stays without one. Returns the version."""
    from driftgate import registry
    from driftgate.gates.checks.export_parity import ExportParityCheck, check_export_parity

    tracking, name = registered.config.tracking, registered.config.model.name
    rows = registered.rows.to_numpy(np.float32)
    folder = tmp_path_factory.mktemp("onnx-v1")
    [result] = check_export_parity(
        registered.versions["1"], rows, ExportParityCheck(format="onnx"),
        rows.min(axis=0), rows.max(axis=0), folder,
    )  # fmt: skip
    assert result.passed, result.message
    run_id = registry.version_info(tracking, name, "1").run_id
    registry.log_exports(tracking, run_id, [Path(p) for p in result.artifacts])
    return "1"
