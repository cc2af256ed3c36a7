"""Where one /predict request's time goes, per backend, profiled on the real service.

The demo classifier is trained and gated with ONNX (its ``exports/model.onnx`` logged
on its run), then for each ``serving.backend`` the real app runs under uvicorn in this
process's main thread with cProfile on, while a client *process* (benchmarks/loadgen.py,
so it takes no GIL from the server) sends ``--requests`` one-record requests over
``--concurrency`` keep-alive connections. The event loop's time per request is split
into the stages of ``routers/predict.py``; the writer thread (group commit, fsync) is
timed by the service's own commit metric. Then the scorers alone, batch of one:
MLflow ``PyFuncModel.predict`` (with its per-call schema enforcement), the flavour's
predict that the service calls, and ONNX Runtime.

Run: .venv/bin/python benchmarks/request_path_bench.py [--requests 3000]
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import json
import os
import pstats
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]

# (label, file suffix, function name) of the stages in the event loop, as cProfile names them.
STAGES = [
    ("body: JSON + pydantic", "serving/jsonbody.py", "read_body"),
    ("  of which pydantic", "pydantic/main.py", "model_validate"),
    ("pause + champion", "serving/pause.py", "current"),
    ("normalise", "serving/validation.py", "normalise"),
    ("contract validation", "serving/routers/predict.py", "_broken_fields"),
    ("encode (matrix)", "serving/champion.py", "encode"),
    ("predict (scorer)", "serving/champion.py", "predict"),
    ("score (outputs.py)", "serving/outputs.py", "score"),
    ("samples built", "serving/routers/predict.py", "_samples"),
    ("submit to writer", "serving/writer.py", "submit"),
    ("answer JSON", "serving/responses.py", "render"),
    ("whole handler", "serving/routers/predict.py", "predict"),
]


def stage_times(stats: pstats.Stats, requests: int) -> dict[str, float]:
    """Cumulative µs per request of each stage (callers' time included)."""
    found: dict[str, float] = {}
    for (path, _line, name), (_cc, _nc, _tt, cumulative, _callers) in stats.stats.items():
        for label, suffix, function in STAGES:
            if name == function and path.endswith(suffix):
                found[label] = found.get(label, 0.0) + cumulative
    return {label: found.get(label, 0.0) / requests * 1e6 for label, _, _ in STAGES}


def serve_profiled(config, settings, payload_file: Path, requests: int, concurrency: int):
    """(stats, outcome) of one run: cProfile covers the event loop's thread only, from
    after the warm-up to the end of the measured load."""
    import asyncio

    import uvicorn

    from driftgate.serving.app import create_app
    from driftgate.serving.server import uvicorn_limits
    from tests.conftest import free_port

    port = free_port()
    app = create_app(config, settings)
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning",
                       access_log=False, **uvicorn_limits())
    )  # fmt: skip
    loop = asyncio.new_event_loop()
    # CPU time of the profiled thread: waits for the GIL (the writer thread holds it
    # between fsyncs) and idle selects do not count as a stage's time.
    profile = cProfile.Profile(time.thread_time)
    outcome: dict = {}

    def on_loop(call) -> None:
        # cProfile profiles the thread that enables it: the event loop's, here.
        done = threading.Event()
        loop.call_soon_threadsafe(lambda: (call(), done.set()))
        done.wait()

    def client() -> None:
        while not server.started:
            time.sleep(0.05)
        url = f"http://127.0.0.1:{port}/predict"
        load = [sys.executable, str(ROOT / "benchmarks" / "loadgen.py"), url,
                "--payload", str(payload_file), "--concurrency", str(concurrency)]  # fmt: skip
        subprocess.run([*load, "--requests", "300"], check=True, capture_output=True)
        writer = next(t for t in threading.enumerate() if t.name == "sample-writer")
        pauses.recording = True
        on_loop(profile.enable)
        began, cpu, writer_cpu = time.perf_counter(), time.process_time(), thread_cpu(writer)
        done = subprocess.run([*load, "--requests", str(requests)], check=True,
                              capture_output=True, text=True)  # fmt: skip
        outcome["seconds"] = time.perf_counter() - began
        outcome["process_cpu"] = time.process_time() - cpu
        outcome["writer_cpu"] = thread_cpu(writer) - writer_cpu
        on_loop(profile.disable)
        pauses.recording = False
        outcome["summary"] = json.loads(done.stdout.strip().splitlines()[-1])
        outcome["metrics"] = app.state.service.metrics.render().decode()
        server.should_exit = True

    pauses = GcPauses()
    thread = threading.Thread(target=client, daemon=True)
    thread.start()
    loop.run_until_complete(server.serve())
    loop.close()
    thread.join()
    pauses.close()
    outcome["gc"] = pauses
    return pstats.Stats(profile), outcome


class GcPauses:
    """Collections per generation and the time they took, while recording."""

    def __init__(self) -> None:
        self.count, self.seconds, self._started, self.recording = [0] * 3, [0.0] * 3, 0.0, False
        gc.callbacks.append(self._callback)

    def _callback(self, phase: str, info: dict) -> None:
        if not self.recording:
            return
        if phase == "start":
            self._started = time.perf_counter()
        else:
            self.count[info["generation"]] += 1
            self.seconds[info["generation"]] += time.perf_counter() - self._started

    def close(self) -> None:
        gc.callbacks.remove(self._callback)


def thread_cpu(thread: threading.Thread) -> float:
    """User + system CPU seconds of one thread so far (Linux /proc)."""
    fields = Path(f"/proc/self/task/{thread.native_id}/stat").read_text().rsplit(")", 1)[1]
    user, system = fields.split()[11:13]
    return (int(user) + int(system)) / os.sysconf("SC_CLK_TCK")


def commit_seconds(metrics_text: str) -> tuple[float, float]:
    """(sum of commit seconds, commits) from the service's Prometheus text."""
    total = count = 0.0
    for line in metrics_text.splitlines():
        if line.startswith("driftgate_sample_commit_seconds_sum"):
            total = float(line.split()[-1])
        elif line.startswith("driftgate_sample_commit_seconds_count"):
            count = float(line.split()[-1])
    return total, count


def scorer_micro(tracking, name: str, version: str, features: int, repeats: int = 3000) -> dict:
    from driftgate import registry
    from driftgate.serving.backends import OnnxRuntimeScorer, PyfuncScorer

    pyfunc = registry.load_pyfunc(tracking, f"models:/{name}/{version}")
    onnx = OnnxRuntimeScorer(registry.download_onnx_model(tracking, name, version), 1, 1)
    row = np.random.default_rng(0).normal(size=(1, features)).astype(np.float32)
    candidates = {
        "PyFuncModel.predict (schema enforced)": pyfunc.predict,
        "flavour predict (service, pyfunc)": PyfuncScorer(pyfunc).predict,
        "ONNX Runtime session.run": onnx.predict,
    }
    timings = {}
    for label, call in candidates.items():
        for _ in range(200):
            call(row)
        began = time.perf_counter()
        for _ in range(repeats):
            call(row)
        timings[label] = (time.perf_counter() - began) / repeats * 1e6
    return timings


def prepare_project(root: Path):
    """Train the demo model, gate it with ONNX (export logged), set it champion."""
    from driftgate.config import load_config
    from driftgate.gates.config import load_gate_config
    from driftgate.jobs.promote import run_promotion
    from driftgate.jobs.train import run_training

    (root / "driftgate.yaml").write_text("home: state\n")
    config = load_config(root / "driftgate.yaml")
    version = run_training(config, on_epoch=None).registered.version
    began = time.perf_counter()
    outcome = run_promotion(config, load_gate_config(), version)
    gate_seconds = time.perf_counter() - began
    onnx = next(c for c in outcome.result.checks if c.name == "export_parity_onnx")
    if not outcome.promoted:
        raise SystemExit(f"the gate failed the demo model:\n{outcome.result.table()}")
    return config, version, gate_seconds, onnx


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=3000)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--dump", type=Path, help="write each backend's pstats file here")
    parser.add_argument(
        "--no-gc-freeze", action="store_true",
        help="the service as before it froze its start-up objects out of the collector",
    )  # fmt: skip
    args = parser.parse_args()
    if args.no_gc_freeze:
        gc.freeze = lambda: None
    sys.path.insert(0, str(ROOT))

    from driftgate.config.serving import ServingSettings
    from driftgate.jobs.data import prepare_data

    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        config, version, gate_seconds, onnx = prepare_project(root)
        print(f"gate with ONNX: {gate_seconds:.1f} s; {onnx.name}: {onnx.observed}, "
              f"{onnx.seconds:.1f} s")  # fmt: skip
        data = prepare_data(config)
        rows = data.splits.test[data.features].head(500).to_dict("records")
        payload_file = root / "payloads.json"
        payload_file.write_text(json.dumps([{"records": [r]} for r in rows]))
        table = {}
        for backend in ("pyfunc", "onnxruntime"):
            settings = ServingSettings(
                backend=backend,
                sample_store_url=f"sqlite:///{root / f'{backend}.db'}",
                control_store_url=f"sqlite:///{root / f'{backend}-control.db'}",
            )
            stats, outcome = serve_profiled(
                config, settings, payload_file, args.requests, args.concurrency
            )
            table[backend] = stage_times(stats, args.requests)
            if args.dump:
                args.dump.mkdir(parents=True, exist_ok=True)
                stats.dump_stats(args.dump / f"{backend}.pstats")
            commit_total, commits = commit_seconds(outcome["metrics"])
            summary = outcome["summary"]
            per = 1e6 / args.requests
            table[backend]["event loop thread CPU"] = stats.total_tt * per
            table[backend]["writer thread CPU"] = outcome["writer_cpu"] * per
            table[backend]["process CPU (all threads)"] = outcome["process_cpu"] * per
            table[backend]["writer commit, wall (fsync)"] = commit_total * per
            pauses = outcome["gc"]
            print(f"{backend}: {summary['requests_per_second']:.0f} req/s, p50 "
                  f"{summary['p50_ms']:.2f} ms, p99 {summary['p99_ms']:.2f} ms, "
                  f"{commits:.0f} commits for {args.requests} requests; GC collections "
                  f"per generation {pauses.count}, "
                  f"ms {[round(x * 1e3) for x in pauses.seconds]}")  # fmt: skip
            table[backend]["GC pauses (any thread)"] = sum(pauses.seconds) * 1e6 / args.requests
        print(f"\nµs per request ({args.requests} one-record requests, {args.concurrency} "
              "connections, cProfile on: CPU µs inflated by it)")  # fmt: skip
        print(f"{'stage':<34}{'pyfunc':>10}{'onnxruntime':>13}")
        for label in table["pyfunc"]:
            print(f"{label:<34}{table['pyfunc'][label]:>10.0f}{table['onnxruntime'][label]:>13.0f}")
        print("\nscorer alone, one row (µs per call, no profiler):")
        for label, micro in scorer_micro(
            config.tracking, config.model.name, version, len(data.features)
        ).items():
            print(f"  {label:<40}{micro:>8.1f}")


if __name__ == "__main__":
    main()
