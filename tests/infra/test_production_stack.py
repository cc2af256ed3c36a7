"""The production topology of issue 7, end to end, with real parts only.

PostgreSQL holds everything: the MLflow tracking server (``infra/mlflow-server.sh``,
artifacts proxied to a folder), the Prefect server (``infra/prefect-server.sh``), and the
service's sample, control and review stores. A process worker (``infra/prefect-worker.sh``)
runs every flow: ``driftgate deploy`` registers the deployments, the ``train`` deployment
trains and promotes over HTTP, ``driftgate serve`` serves the champion, and then the
Prefect scheduler itself fires the drift-check deployments (cron ``* * * * *`` from the
gate config) on the worker, which judge the window of traffic just posted, open reviews
and pause inference in PostgreSQL, and log their evidence to the MLflow server.

Each child gets a scrubbed environment (no inherited ``MLFLOW_*``, ``PREFECT_*`` or
``DRIFTGATE_*``), and every failure message carries the tail of the relevant log.
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import httpx
import numpy as np
import pytest
from mlflow import MlflowClient

from driftgate.config import load_config
from driftgate.jobs import demo as loop
from driftgate.stores.control import ControlStore
from driftgate.stores.reviews import ReviewStore
from driftgate.stores.samples import SqlSampleStore
from tests.conftest import free_port
from tests.driftgate.lenient_gates import LENIENT_GATES
from tests.infra.conftest import (
    ServerProcess,
    postgres_database,
    scrubbed_env,
    scrubbed_os_environ,
    with_driver,
)

# Serial in make test: it starts the whole stack under start-up deadlines.
pytestmark = pytest.mark.serial

REPO_ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
MODEL = "rainfall-classifier"
POOL = "driftgate-test"
WINDOW = "15m"  # the posted traffic is minutes old when the scheduled check judges it
MONITORS = f"""
monitors:
  - name: mean-shift-kl
    metric: kl
    features: all
    threshold: 0.1
    schedule: "* * * * *"
    window: {WINDOW}
    action: open_review
  - name: missing-values
    metric: missing_share
    features: all
    threshold: 0.05
    schedule: "* * * * *"
    window: {WINDOW}
    action: pause_inference
"""
DRIFT_DEPLOYMENTS = {
    "mean-shift-kl": f"drift-check/{MODEL}-mean-shift-kl",
    "missing-values": f"drift-check/{MODEL}-missing-values",
}
FINAL = {"COMPLETED", "FAILED", "CRASHED", "CANCELLED"}


@dataclass
class Stack:
    root: Path
    mlflow_uri: str
    prefect_api: str
    store_url: str
    artifacts: Path
    mlflow: ServerProcess
    prefect: ServerProcess
    worker: ServerProcess

    def env(self, home: str, **extra: str) -> dict[str, str]:
        """A scrubbed environment for a Prefect client process of this stack."""
        return scrubbed_env(
            MLFLOW_TRACKING_URI=self.mlflow_uri,
            PREFECT_API_URL=self.prefect_api,
            PREFECT_HOME=str(self.root / home),
            **extra,
        )

    def logs(self) -> str:
        return "\n".join(p.tail(40) for p in (self.worker, self.prefect, self.mlflow))


@contextlib.contextmanager
def prefect_client(api_url: str):
    """A sync client of this stack's Prefect server, whatever the process-wide settings say
    (the flow tests' temporary server may still be configured in this process)."""
    from prefect.client.orchestration import get_client
    from prefect.settings import PREFECT_API_URL, temporary_settings

    with (
        temporary_settings(updates={PREFECT_API_URL: api_url}),
        get_client(sync_client=True) as client,
    ):
        yield client


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    """PostgreSQL databases, both servers and a worker; all stopped and dropped afterwards."""
    root = tmp_path_factory.mktemp("stack")
    with contextlib.ExitStack() as cleanup:
        mlflow_db = cleanup.enter_context(postgres_database("driftgate_mlflow"))
        prefect_db = cleanup.enter_context(postgres_database("driftgate_prefect"))
        store_db = cleanup.enter_context(postgres_database("driftgate_stores"))
        mlflow_port, prefect_port = free_port(), free_port()
        mlflow_uri = f"http://127.0.0.1:{mlflow_port}"
        prefect_api = f"http://127.0.0.1:{prefect_port}/api"
        artifacts = root / "mlflow-artifacts"
        mlflow = ServerProcess(
            "mlflow server",
            ["bash", str(REPO_ROOT / "infra" / "mlflow-server.sh")],
            scrubbed_env(
                MLFLOW_BACKEND_STORE_URI=with_driver(mlflow_db, "psycopg"),
                MLFLOW_ARTIFACTS_DESTINATION=artifacts.as_uri(),
                MLFLOW_PORT=str(mlflow_port),
                MLFLOW_WORKERS="1",
                # driftgate uses none of MLflow's server-side jobs; their consumer
                # processes cost CPU at start-up and seconds at shutdown.
                MLFLOW_SERVER_ENABLE_JOB_EXECUTION="false",
                MLFLOW_BIN=str(BIN / "mlflow"),
                MLFLOW_TRACKING_URI=mlflow_uri,
            ),
            root,
            root / "mlflow-server.log",
        )
        prefect = ServerProcess(
            "prefect server",
            ["bash", str(REPO_ROOT / "infra" / "prefect-server.sh")],
            scrubbed_env(
                PREFECT_API_DATABASE_CONNECTION_URL=with_driver(prefect_db, "asyncpg"),
                PREFECT_HOME=str(root / "prefect-server-home"),
                PREFECT_SERVER_API_PORT=str(prefect_port),
                PREFECT_SERVER_UI_ENABLED="false",  # no UI build to copy at start-up
                PREFECT_BIN=str(BIN / "prefect"),
                MLFLOW_TRACKING_URI=mlflow_uri,
            ),
            root,
            root / "prefect-server.log",
        )
        # Started together, stopped in reverse order (ExitStack), databases dropped last.
        cleanup.callback(mlflow.start().stop)
        cleanup.callback(prefect.start().stop)
        mlflow.wait_for_health(f"{mlflow_uri}/health", timeout=120)
        prefect.wait_for_health(f"{prefect_api}/health", timeout=120)
        worker = ServerProcess(
            "prefect worker",
            ["bash", str(REPO_ROOT / "infra" / "prefect-worker.sh")],
            scrubbed_env(
                PREFECT_API_URL=prefect_api,
                PREFECT_HOME=str(root / "prefect-worker-home"),
                PREFECT_BIN=str(BIN / "prefect"),
                # Poll often, and start a scheduled run's process (imports) before its time.
                PREFECT_WORKER_QUERY_SECONDS="2",
                PREFECT_WORKER_PREFETCH_SECONDS="30",
                DRIFTGATE_WORK_POOL=POOL,
                MLFLOW_TRACKING_URI=mlflow_uri,
            ),
            root,
            root / "prefect-worker.log",
        )
        cleanup.callback(worker.start().stop)
        yield Stack(
            root=root,
            mlflow_uri=mlflow_uri,
            prefect_api=prefect_api,
            store_url=store_db,
            artifacts=artifacts,
            mlflow=mlflow,
            prefect=prefect,
            worker=worker,
        )


@pytest.fixture(scope="module")
def project(stack):
    """driftgate.yaml on the MLflow server and PostgreSQL stores; a short training run;
    lenient promotion gates; both monitors on a one-minute cron."""
    root = stack.root / "project"
    root.mkdir()
    (root / "params.yaml").write_text(
        "train:\n  seed: 42\n  hidden_sizes: [16]\n  max_epochs: 3\n  batch_size: 128\n"
    )
    (root / "gates.yaml").write_text(LENIENT_GATES + MONITORS)
    (root / "gates-train-only.yaml").write_text(LENIENT_GATES)
    port = free_port()
    config_file = root / "driftgate.yaml"
    config_file.write_text(
        f"home: {root / 'home'}\n"
        f"model:\n  name: {MODEL}\n"
        f"tracking:\n  uri: {stack.mlflow_uri}\n"
        "params: params.yaml\n"
        "gates: gates.yaml\n"
        "serving:\n"
        f"  port: {port}\n"
        f"  sample_store_url: {stack.store_url}\n"
        f"  control_store_url: {stack.store_url}\n"
        "  model_poll_seconds: 1\n"
        "  pause_poll_seconds: 0\n"
    )
    return {"root": root, "file": config_file, "config": load_config(config_file), "port": port}


def deploy(stack: Stack, project: dict, *extra: str) -> str:
    """``driftgate deploy`` as an operator runs it, against the stack's Prefect server."""
    command = [sys.executable, "-m", "driftgate.cli", "deploy", "--config", str(project["file"])]
    done = subprocess.run(
        [*command, "--work-pool", POOL, *extra],
        cwd=project["root"],
        env=stack.env("deploy-home"),
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, (
        f"driftgate deploy exited {done.returncode}\n{done.stdout}\n{done.stderr}\n{stack.logs()}"
    )
    return done.stdout


def describe_run(run) -> str:
    state = run.state
    return (
        f"flow run {run.name} ({run.id}) of deployment {run.deployment_id}: "
        f"{state.type.value if state else None} {state.name if state else ''}: "
        f"{state.message if state else ''}"
    )


def wait_for_worker(stack: Stack, timeout: float = 90.0) -> None:
    def online() -> bool:
        try:
            with prefect_client(stack.prefect_api) as client:
                return bool(client.read_workers_for_work_pool(POOL))
        except Exception:  # the pool may not exist yet: the worker creates it
            return False

    stack.worker.wait_until(online, timeout, f"a worker registered in pool '{POOL}'")


@pytest.fixture(scope="module")
def trained(stack, project):
    """The ``train`` deployment run by the worker: train, register, gate and promote."""
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterParentFlowRunId

    output = deploy(stack, project, "--gates", str(project["root"] / "gates-train-only.yaml"))
    wait_for_worker(stack)
    with prefect_client(stack.prefect_api) as client:
        deployment = client.read_deployment_by_name(f"train/{MODEL}")
        run = client.create_flow_run_from_deployment(deployment.id)
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline:
            run = client.read_flow_run(run.id)
            if run.state and run.state.type.value in FINAL:
                break
            time.sleep(2)
        assert run.state and run.state.is_completed(), f"{describe_run(run)}\n{stack.logs()}"

        subflows = client.read_flow_runs(
            flow_run_filter=FlowRunFilter(
                parent_flow_run_id=FlowRunFilterParentFlowRunId(any_=[run.id])
            )
        )
    return {"deploy_output": output, "run": run, "subflows": subflows}


@pytest.fixture(scope="module")
def service(project, trained, stack):
    """``driftgate serve`` on the champion, writing samples to PostgreSQL."""
    port = project["port"]
    with scrubbed_os_environ(MLFLOW_TRACKING_URI=stack.mlflow_uri):
        process = loop.start_service(str(project["file"]), port, stack.root / "service.log")
    base_url = f"http://127.0.0.1:{port}"
    try:
        try:
            loop.wait_until_ready(base_url, process)
        except (RuntimeError, TimeoutError) as exc:
            tail = (stack.root / "service.log").read_text(errors="replace")[-4000:]
            raise AssertionError(f"{exc}\n--- service log ---\n{tail}") from exc
        yield base_url
    finally:
        loop.stop_service(process)


def test_the_train_deployment_trains_and_promotes_on_the_worker(stack, project, trained):
    assert f"train/{MODEL}" in trained["deploy_output"]
    assert "drift-check" not in trained["deploy_output"]  # that gate config has no monitors
    (gate_run,) = trained["subflows"]
    assert gate_run.state.is_completed(), describe_run(gate_run)

    client = MlflowClient(tracking_uri=stack.mlflow_uri, registry_uri=stack.mlflow_uri)
    model = client.get_registered_model(MODEL)
    assert model.aliases == {"champion": "1"}
    version = client.get_model_version(MODEL, "1")
    run = client.get_run(version.run_id)
    assert int(run.data.params["max_epochs"]) == 3  # params.yaml of the project reached the worker
    # Artifacts went through the server's proxy into its destination folder.
    assert any(stack.artifacts.rglob("MLmodel")), list(stack.artifacts.rglob("*"))[:20]


def post_traffic(base_url: str, frame, features: list[str], gap_feature: str | None = None):
    """One record per request, stamped by the service's clock (so the scheduled check's
    window, which ends "now", holds them); ``gap_feature`` null in every record (a
    silent sensor)."""
    codes = []
    with httpx.Client(base_url=base_url, timeout=30) as client:
        for row in frame[features].itertuples(index=False):
            record = dict(zip(features, map(float, row), strict=True))
            if gap_feature:
                record[gap_feature] = None
            codes.append(client.post("/predict", json={"records": [record]}).status_code)
    return codes


def wait_for_scheduled_runs(stack: Stack, deployment_ids: dict, timeout: float) -> dict:
    """The first COMPLETED flow run of each deployment; fail on a failed or crashed one."""
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterDeploymentId

    deadline = time.monotonic() + timeout
    with prefect_client(stack.prefect_api) as client:
        while True:
            runs = client.read_flow_runs(
                flow_run_filter=FlowRunFilter(
                    deployment_id=FlowRunFilterDeploymentId(any_=list(deployment_ids.values()))
                )
            )
            broken = [r for r in runs if r.state and r.state.type.value in {"FAILED", "CRASHED"}]
            assert not broken, "\n".join(describe_run(r) for r in broken) + ("\n" + stack.logs())
            done = {}
            for monitor, deployment_id in deployment_ids.items():
                completed = [
                    r
                    for r in runs
                    if r.deployment_id == deployment_id and r.state and r.state.is_completed()
                ]
                if completed:
                    done[monitor] = min(completed, key=lambda r: r.expected_start_time)
            if len(done) == len(deployment_ids):
                return done
            if time.monotonic() > deadline:
                states = sorted(
                    f"{r.name}: {r.state.name if r.state else None} @ {r.expected_start_time}"
                    for r in runs
                )
                missing = sorted(set(deployment_ids) - set(done))
                raise AssertionError(
                    f"no completed scheduled drift check for {missing} after {timeout:.0f} s; "
                    f"runs: {states}\n{stack.logs()}"
                )
            time.sleep(2)


def stop_schedules(stack: Stack, deployment_ids: dict, timeout: float = 90.0) -> None:
    """Pause the drift-check deployments (their future runs are deleted) and let runs in
    flight finish, so that nothing is cut off mid-write at teardown."""
    from prefect.client.schemas.filters import (
        FlowRunFilter,
        FlowRunFilterDeploymentId,
        FlowRunFilterState,
        FlowRunFilterStateType,
    )
    from prefect.client.schemas.objects import StateType

    with prefect_client(stack.prefect_api) as client:
        for deployment_id in deployment_ids.values():
            client.pause_deployment(deployment_id)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            active = client.read_flow_runs(
                flow_run_filter=FlowRunFilter(
                    deployment_id=FlowRunFilterDeploymentId(any_=list(deployment_ids.values())),
                    state=FlowRunFilterState(
                        type=FlowRunFilterStateType(any_=[StateType.PENDING, StateType.RUNNING])
                    ),
                )
            )
            if not active:
                return
            time.sleep(2)


def test_the_scheduled_drift_check_on_the_worker_reviews_and_pauses(
    stack, project, trained, service
):
    from driftgate.jobs.data import prepare_data

    config = project["config"]
    data = prepare_data(config, validate_contract=False)
    # Drift: the 1990s (about half of these rows break the contract's ranges: 422).
    late = data.splits.production[data.splits.production["date"].dt.year >= 1990].iloc[:300]
    drift_codes = post_traffic(service, late, data.features)
    assert drift_codes.count(200) >= 100 and set(drift_codes) <= {200, 422}, drift_codes
    # A silent dew-point sensor on in-contract rows: nulls are accepted and stored as
    # missing (about 15% of the window, over the 5% of the missing-values monitor).
    pool = data.splits.train[data.splits.train["sea_level_pressure"].abs() < 10]
    gap = pool.iloc[np.random.default_rng(7).integers(0, len(pool), 30)]
    gap_codes = post_traffic(service, gap, data.features, gap_feature="dew_point")
    assert set(gap_codes) == {200}, gap_codes
    accepted = drift_codes.count(200) + len(gap_codes)
    samples = SqlSampleStore(stack.store_url)
    try:
        assert samples.count() == accepted  # every 200 was committed to PostgreSQL first
    finally:
        samples.close()

    output = deploy(stack, project)
    for name in DRIFT_DEPLOYMENTS.values():
        assert name in output and "* * * * *" in output
    with prefect_client(stack.prefect_api) as client:
        deployment_ids = {
            monitor: client.read_deployment_by_name(name).id
            for monitor, name in DRIFT_DEPLOYMENTS.items()
        }
    try:
        runs = wait_for_scheduled_runs(stack, deployment_ids, timeout=180)
    finally:
        stop_schedules(stack, deployment_ids)
    for run in runs.values():
        # Created by the server's scheduler from the gate config's cron, not by this test.
        assert run.auto_scheduled, run
        assert run.expected_start_time.second == 0 and run.expected_start_time.microsecond == 0

    reviews = ReviewStore(stack.store_url)
    control = ControlStore(stack.store_url)
    try:
        opened = {r.monitor: r for r in reviews.list(status="open", model_name=MODEL)}
        state = control.state(MODEL)
        events = control.events(MODEL)
    finally:
        reviews.close()
        control.close()
    assert set(opened) == {"mean-shift-kl", "missing-values"}, opened
    assert "dew_point" in opened["missing-values"].features
    assert state.paused and state.monitor == "missing-values", state
    assert state.review_id == opened["missing-values"].id and state.actor == "drift-check"
    # One flip of the switch: later windows find it already paused.
    assert [(e.action, e.monitor) for e in events if e.changed] == [("pause", "missing-values")]

    mlflow = MlflowClient(tracking_uri=stack.mlflow_uri, registry_uri=stack.mlflow_uri)
    evidence = {}
    for monitor, review in opened.items():
        run_ids = [e.removeprefix("runs:/") for e in review.evidence if e.startswith("runs:/")]
        assert run_ids, review
        evidence[monitor] = mlflow.get_run(run_ids[0])
    for monitor, run in evidence.items():
        assert monitor in run.data.tags["driftgate.breached"].split(","), run.data.tags
        assert run.data.tags["driftgate.model_version"] == "1"
        assert run.data.metrics["rows"] == accepted
        assert {a.path for a in mlflow.list_artifacts(run.info.run_id)} >= {"drift", "monitors"}
    experiment = mlflow.get_experiment(evidence["missing-values"].info.experiment_id)
    assert experiment.name == config.monitoring.experiment
    assert state.evidence[0] == f"runs:/{evidence['missing-values'].info.run_id}"

    refused = httpx.post(
        f"{service}/predict",
        json={"records": [{f: float(gap[f].iloc[0]) for f in data.features}]},
        timeout=30,
    )
    assert refused.status_code == 503, refused.text
    body = refused.json()
    assert body["paused"] is True and body["review_id"] == opened["missing-values"].id
    assert "missing-values" in body["reason"]
