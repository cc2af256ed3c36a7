"""Service throughput and latency next to `mlflow models serve`, and drift-check time.

One run, same machine, same registered model (the demo classifier, gated with the
demo's gates.yaml, whose export_parity logs its ONNX export):
- `driftgate serve` on `serving.backend: pyfunc` and on `onnxruntime` (contract
  validation + prediction + durable group-commit logging of every sample to SQLite,
  synchronous=FULL) vs `mlflow models serve --env-manager local` (prediction only, no
  logging), all loaded from loopback by benchmarks/loadgen.py with one record per
  request, for `--seconds` each;
- the drift-check job (`judge_window`) on a window of `--window-rows` stored samples:
  contract (GX), drift statistics, MLflow run with the Evidently report.

Run: .venv/bin/python benchmarks/serving_bench.py [--seconds 10] [--concurrency 16]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx


def wait_ready(url: str, process: subprocess.Popen, timeout: float = 180.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"{url}: server exited with {process.returncode}")
        try:
            if httpx.get(url, timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.3)
    raise TimeoutError(url)


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def load(url: str, payloads: list[dict], seconds: float, concurrency: int) -> dict:
    # Run as a script, this folder is on sys.path but the repository root is not.
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from benchmarks.loadgen import run_load

    asyncio.run(run_load(url, payloads[:50], concurrency=concurrency, total=200))  # warm-up
    return asyncio.run(run_load(url, payloads, concurrency=concurrency, duration=seconds)).summary()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--window-rows", type=int, default=10_000)
    args = parser.parse_args()

    from driftgate.config import load_config
    from driftgate.gates.config import load_gate_config
    from driftgate.jobs.promote import run_promotion
    from driftgate.jobs.train import run_training

    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        port_dg, port_onnx, port_ml = free_port(), free_port(), free_port()
        for name, port, backend in (("driftgate", port_dg, "pyfunc"),
                                    ("onnx", port_onnx, "onnxruntime")):  # fmt: skip
            (root / f"{name}.yaml").write_text(
                f"home: state\nserving:\n  port: {port}\n  accept_client_timestamps: true\n"
                f"  backend: {backend}\n"
                f"  sample_store_url: sqlite:///{root / 'state' / f'{name}-samples.db'}\n"
            )
        config = load_config(root / "driftgate.yaml")
        outcome = run_training(config, on_epoch=None)
        version = outcome.registered.version
        # The demo's gate: its export_parity logs exports/model.onnx, which the
        # onnxruntime backend serves; a passing gate makes the version champion.
        gate = run_promotion(config, load_gate_config(), version)
        if not gate.promoted:
            raise SystemExit(f"the demo model failed its gate:\n{gate.result.table()}")
        from driftgate.jobs.data import prepare_data

        data = prepare_data(config)
        rows = data.splits.test[data.features].to_dict("records")
        # mlflow models serve starts `uvicorn` through the shell: the venv's bin must be on PATH.
        bin_dir = str(Path(sys.executable).parent)
        env = {**os.environ, "MLFLOW_TRACKING_URI": config.tracking.uri,
               "PATH": f"{bin_dir}:{os.environ.get('PATH', '')}"}  # fmt: skip
        servers = {
            f"driftgate serve {backend}": (
                [sys.executable, "-m", "driftgate.cli", "serve", "--port", str(port),
                 "--config", str(root / f"{name}.yaml")],
                f"http://127.0.0.1:{port}/readyz",
                f"http://127.0.0.1:{port}/predict",
                [{"records": [r]} for r in rows],
            )
            for name, port, backend in (("driftgate", port_dg, "pyfunc"),
                                        ("onnx", port_onnx, "onnxruntime"))
        } | {
            "mlflow models serve": (
                [str(Path(sys.executable).with_name("mlflow")), "models", "serve",
                 "-m", f"models:/{config.model.name}/{version}", "--env-manager", "local",
                 "--host", "127.0.0.1", "-p", str(port_ml), "--workers", "1"],
                f"http://127.0.0.1:{port_ml}/ping",
                f"http://127.0.0.1:{port_ml}/invocations",
                [{"inputs": [[r[f] for f in data.features]]} for r in rows],
            ),
        }  # fmt: skip
        results = {}
        for name, (command, ready, url, payloads) in servers.items():
            with open(root / f"{name.replace(' ', '-')}.log", "wb") as log:
                process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env)
            try:
                wait_ready(ready, process)
                results[name] = load(url, payloads, args.seconds, args.concurrency)
            finally:
                process.terminate()
                process.wait(timeout=30)

        print(f"\n{args.seconds:g} s per server, {args.concurrency} connections, 1 record/request")
        print(f"{'server':<34}{'req/s':>9}{'p50 ms':>9}{'p99 ms':>9}{'errors':>8}")
        for name, summary in results.items():
            print(
                f"{name:<34}{summary['requests_per_second']:>9.1f}{summary['p50_ms']:>9.2f}"
                f"{summary['p99_ms']:>9.2f}{summary['errors']:>8}"
            )
        peer = results["mlflow models serve"]["requests_per_second"]
        for backend in ("pyfunc", "onnxruntime"):
            ratio = results[f"driftgate serve {backend}"]["requests_per_second"] / peer
            print(
                f"driftgate ({backend}) / mlflow throughput: {ratio:.2f}x "
                "(driftgate also validates and durably logs every sample)"
            )

        # Drift-check wall time per window.
        from datetime import UTC, datetime, timedelta

        from driftgate.gates.config import load_gate_config
        from driftgate.jobs.drift_check import judge_window
        from driftgate.stores.samples import Sample, SqlSampleStore

        start = datetime(2040, 1, 1, tzinfo=UTC)
        store = SqlSampleStore(config.serving.sample_store(config.home_dir))
        production = data.splits.production[data.features].head(args.window_rows)
        store.append([
            Sample(timestamp=start + timedelta(seconds=i), request_id=f"w{i}", record_index=0,
                   model_name=config.model.name, model_version=version,
                   features=dict(zip(data.features, map(float, row), strict=True)),
                   prediction=0.5, predicted_class=1)
            for i, row in enumerate(production.itertuples(index=False))
        ])  # fmt: skip
        store.close()
        gates = load_gate_config()
        timings = []
        for repeat in range(3):
            began = time.perf_counter()
            judge_window(config, gates, start, start + timedelta(days=1 + repeat))
            timings.append(time.perf_counter() - began)
        print(
            f"\ndrift check of a {len(production)}-row window (contract, drift, MLflow run, "
            f"Evidently report, actions): first {timings[0]:.2f} s, "
            f"then median {statistics.median(timings[1:]):.2f} s"
        )


if __name__ == "__main__":
    main()
