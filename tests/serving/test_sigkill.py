"""SIGKILL under concurrent load: every request that got a 200 is in the sample store,
and every request refused with 422 is in it as rejected traffic (issue 16), with the
sample store on SQLite and on PostgreSQL.

The service runs in its own process (``serving.server.run``, as ``driftgate serve``
does); a bounded pool of keep-alive connections (:mod:`benchmarks.loadgen`) posts
requests with known ids over loopback;
the process is killed with SIGKILL while requests are in flight. Then the store is
opened afresh and every acknowledged request must be there with all its records.
The load phase before the kill doubles as a small benchmark (printed with ``-s``).
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import threading
import time

import httpx
import pytest

from benchmarks.loadgen import run_load
from driftgate.stores.samples import SqlSampleStore
from tests.conftest import free_port
from tests.serving.conftest import REPO_ROOT, records_of

# Serial in make test: its load phase must get 100+ requests acknowledged.
pytestmark = pytest.mark.serial

CLIENTS = 16
LOAD_SECONDS = 2.0

LAUNCHER = """
import sys
from driftgate.config import load_config
from driftgate.serving.server import run
from driftgate.config.serving import ServingSettings

config = load_config(sys.argv[1])
settings = ServingSettings.model_validate_json(sys.argv[2])
run(config, settings, port=int(sys.argv[3]), log_level="info")
"""


def start_service(config_file, settings_json: str, port: int, log_path):
    env = {
        **{
            k: v
            for k, v in os.environ.items()
            if k not in ("MLFLOW_TRACKING_URI", "MLFLOW_REGISTRY_URI")
        },
        "PYTHONPATH": str(REPO_ROOT),
        "DRIFTGATE_ADMIN_TOKEN": "x",
    }
    log = open(log_path, "ab")  # noqa: SIM115 - lives as long as the process
    process = subprocess.Popen(
        [sys.executable, "-c", LAUNCHER, str(config_file), settings_json, str(port)],
        cwd=REPO_ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    deadline = time.monotonic() + 90
    last = "no answer"
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"service exited early; see {log_path}")
        try:
            ready = httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=5, trust_env=False)
            if ready.status_code == 200:
                return process
            last = ready.text
        except httpx.HTTPError as exc:
            last = repr(exc)
        time.sleep(0.2)
    process.kill()
    raise TimeoutError(f"service not ready ({last}); see {log_path}")


def load_then_signal(registered, tmp_path, signum: int, store_url: str, backend: str = "pyfunc"):
    """Start the service on the sample store ``store_url``, load it, send ``signum``
    mid-load; return what the client saw (result, acknowledged id -> records), what the
    store holds (id -> records) and the process's exit code."""
    registered.set_champion("1")
    settings = json.dumps(
        {
            "sample_store_url": store_url,
            "control_store_url": f"sqlite:///{tmp_path / 'control.db'}",
            "sqlite_synchronous": "FULL",
            "backend": backend,
        }
    )
    config_file = registered.config.root / "driftgate.yaml"
    port = free_port()
    process = start_service(config_file, settings, port, tmp_path / "service.log")
    url = f"http://127.0.0.1:{port}/predict"
    payloads = [{"records": records_of(registered.rows, i * 4, 1 + i % 4)} for i in range(50)]
    # Every third request is refused (422): a sea-level pressure outside the contract's
    # range. Its records are rejected traffic, stored before the 422 is sent.
    for payload in payloads[::3]:
        payload["records"][0]["sea_level_pressure"] = 5.0
    outcome = {}

    def load() -> None:
        outcome["result"] = asyncio.run(
            run_load(url, payloads, concurrency=CLIENTS, duration=LOAD_SECONDS * 4)
        )

    client = threading.Thread(target=load, daemon=True)
    try:
        client.start()
        time.sleep(LOAD_SECONDS)
        os.kill(process.pid, signum)  # in the middle of the load
        returncode = process.wait(timeout=30)
        client.join(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    result = outcome["result"]

    def records(rid: str) -> int:
        return len(payloads[int(rid.rsplit("-", 1)[1]) % len(payloads)]["records"])

    acknowledged = {rid: records(rid) for rid in result.acknowledged}
    refused = {rid: records(rid) for rid, status in result.statuses.items() if status == 422}
    store = SqlSampleStore(store_url)
    window = store.read_window("2000-01-01", "2100-01-01")
    stored = window.groupby("request_id").size().to_dict()
    rejected = store.read_rejected("2000-01-01", "2100-01-01")
    store.close()
    stored_rejected = rejected.groupby("request_id").size().to_dict() if len(rejected) else {}
    result.refused, result.stored_refused = refused, stored_rejected
    return result, acknowledged, stored, returncode


# The model back end and the sample store are independent, so ONNX Runtime runs on
# SQLite alone and pyfunc on both stores.
@pytest.mark.parametrize(
    ("backend", "sample_url"),
    [("pyfunc", "sqlite"), ("onnxruntime", "sqlite"), ("pyfunc", "postgresql")],
    indirect=["sample_url"],
)
def test_sigkill_under_load_loses_no_acknowledged_request(
    registered, tmp_path, request, backend, sample_url
):
    if backend == "onnxruntime":
        request.getfixturevalue("onnx_exported")  # v1's ONNX model on its run
    result, acknowledged, stored, returncode = load_then_signal(
        registered, tmp_path, signal.SIGKILL, sample_url, backend
    )
    assert returncode == -signal.SIGKILL
    assert len(acknowledged) > 100, f"only {len(acknowledged)} requests acknowledged"
    assert result.errors > 0, "no request was in flight at the kill"
    lost = [rid for rid in acknowledged if rid not in stored]
    assert not lost, f"{len(lost)} acknowledged requests missing, e.g. {lost[:5]}"
    assert all(stored[rid] == n for rid, n in acknowledged.items()), "partial requests stored"
    # Refused requests: every 422 was answered after its records were durable.
    refused, stored_refused = result.refused, result.stored_refused
    assert len(refused) > 30, f"only {len(refused)} refused requests answered"
    lost_refused = [rid for rid in refused if stored_refused.get(rid) != refused[rid]]
    assert not lost_refused, f"{len(lost_refused)} 422s not stored, e.g. {lost_refused[:5]}"
    assert not set(stored_refused) & set(stored), "a request stored both scored and rejected"
    unacknowledged_stored = len(set(stored) - set(acknowledged))
    summary = result.summary()
    print(
        f"\nSIGKILL test ({backend}, {sample_url.partition(':')[0]}): {len(acknowledged)} "
        f"acknowledged + {len(refused)} refused (422, all stored as rejected), "
        f"{result.errors} cut off by the kill, 0 lost, {unacknowledged_stored} stored but "
        f"unanswered; before the kill "
        f"{len(acknowledged) / LOAD_SECONDS:.0f} req/s with {CLIENTS} connections, "
        f"p50 {summary['p50_ms']:.1f} ms, p99 {summary['p99_ms']:.1f} ms"
    )


@pytest.mark.parametrize("sample_url", ["sqlite"], indirect=True)
def test_sigterm_drains_the_queue_and_exits_cleanly(registered, tmp_path, sample_url):
    result, acknowledged, stored, returncode = load_then_signal(
        registered, tmp_path, signal.SIGTERM, sample_url
    )
    # uvicorn re-raises the captured signal once shutdown is complete.
    assert returncode in (0, -signal.SIGTERM)
    log = (tmp_path / "service.log").read_text()
    assert "Application shutdown complete" in log and "Traceback" not in log
    assert len(acknowledged) > 100
    assert set(acknowledged) <= set(stored)
    assert all(stored[rid] == n for rid, n in acknowledged.items())
    assert result.refused and all(
        result.stored_refused.get(rid) == n for rid, n in result.refused.items()
    )
