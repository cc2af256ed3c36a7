"""The service under concurrent load from a loopback client, for a bounded time.

No errors, only 200s for valid requests, and every acknowledged sample in the store
with all its records. Throughput and latency are printed (``-s``) for
docs/reliability.md, never asserted: speed targets live in benchmarks/. The ``slow``
variant is a one-minute soak (``make soak``).
"""

from __future__ import annotations

import asyncio
import json
import signal

import pytest

from benchmarks.loadgen import run_load
from driftgate.stores.samples import SqlSampleStore
from tests.conftest import free_port
from tests.serving.conftest import records_of
from tests.serving.test_sigkill import start_service

# Serial in make test: it runs a timed load phase.
pytestmark = pytest.mark.serial

CLIENTS = 16


def load_for(registered, tmp_path, seconds: float) -> None:
    registered.set_champion("1")
    store_url = f"sqlite:///{tmp_path / 'samples.db'}"
    settings = json.dumps(
        {
            "sample_store_url": store_url,
            "control_store_url": f"sqlite:///{tmp_path / 'control.db'}",
        }
    )
    port = free_port()
    process = start_service(
        registered.config.root / "driftgate.yaml", settings, port, tmp_path / "service.log"
    )
    payloads = [{"records": records_of(registered.rows, i * 4, 1 + i % 4)} for i in range(50)]
    try:
        result = asyncio.run(
            run_load(
                f"http://127.0.0.1:{port}/predict",
                payloads,
                concurrency=CLIENTS,
                duration=seconds,
            )
        )
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=60)
    summary = result.summary()
    assert result.errors == 0, f"{result.errors} connection errors"
    assert set(result.statuses.values()) == {200}, f"statuses: {summary}"
    assert summary["ok"] > 0
    expected = {
        rid: len(payloads[int(rid.rsplit("-", 1)[1]) % len(payloads)]["records"])
        for rid in result.acknowledged
    }
    store = SqlSampleStore(store_url)
    try:
        stored = store.read_window("2000-01-01", "2100-01-01").groupby("request_id").size()
    finally:
        store.close()
    lost = [rid for rid, count in expected.items() if stored.get(rid) != count]
    assert not lost, f"{len(lost)} acknowledged requests not stored whole, e.g. {lost[:5]}"
    print(
        f"\nload {seconds:g} s, {CLIENTS} connections: {summary['ok']} requests "
        f"({sum(expected.values())} samples), {summary['requests_per_second']} req/s, "
        f"p50 {summary['p50_ms']} ms, p99 {summary['p99_ms']} ms, 0 errors, 0 lost"
    )


def test_bounded_load_has_no_errors_and_loses_no_sample(registered, tmp_path):
    load_for(registered, tmp_path, seconds=8)


@pytest.mark.slow
def test_load_soak(registered, tmp_path):
    load_for(registered, tmp_path, seconds=60)
