"""Where one /predict request's time goes, per backend, on the real service.

**Per step, in process** (``step_costs``, the default): the real service state (stores,
champion, writer thread) is opened as the app's lifespan opens it, and each step of
``routers/predict.py`` is timed on its own over ``--requests`` one-record bodies, in
CPU µs per request of the thread that runs it (``time.thread_time``: waiting for the
GIL is not counted): JSON parse, the request's shape, the contract and model checks,
encoding, scoring, the outputs, the samples, the hand-off to the writer, the writer's
group commit (its thread's CPU, batches of ``--concurrency`` requests, the requests
log riding with them), the metrics and the response. Then the whole app, all its
middleware, driven through ASGI in process (no HTTP, ``--concurrency`` requests in
flight), and the same app under uvicorn over loopback HTTP (the client in its own
process): their difference per request is what HTTP and uvicorn cost. ``--rounds``
times each, medians printed.

The demo classifier is trained and gated with ONNX first (its ``exports/model.onnx``
logged on its run), so both backends serve the same version.

**Profiled** (``--profile``): for each ``serving.backend`` the real app runs under
uvicorn in this process's main thread with cProfile on, while a client *process*
(benchmarks/loadgen.py, so it takes no GIL from the server) sends ``--requests``
one-record requests over ``--concurrency`` keep-alive connections. The event loop's
time per request is split into the stages of ``routers/predict.py``; the writer thread
(group commit, fsync) is timed by the service's own commit metric.

Last, the scorers alone, batch of one: MLflow ``PyFuncModel.predict`` (with its
per-call schema enforcement), the flavour's predict that the service calls, and ONNX
Runtime.

Run: .venv/bin/python benchmarks/request_path_bench.py [--requests 3000] [--rounds 3]
     [--profile] [--backends pyfunc,onnxruntime]
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import gc
import json
import os
import pstats
import statistics
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


def serve_profiled(
    config, settings, payload_file: Path, requests: int, concurrency: int, profiled: bool = True
):
    """(stats, outcome) of one run: cProfile covers the event loop's thread only, from
    after the warm-up to the end of the measured load (``profiled`` False: no profiler,
    stats None, the CPU figures as they are without it)."""
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
        subprocess.run(
            [*load, "--requests", "300", "--id-prefix", "warm"], check=True, capture_output=True
        )
        writer = next(t for t in threading.enumerate() if t.name == "sample-writer")
        pauses.recording = True
        if profiled:
            on_loop(profile.enable)
        loop_cpu = []
        on_loop(lambda: loop_cpu.append(time.thread_time()))
        began, cpu, writer_cpu = time.perf_counter(), time.process_time(), thread_cpu(writer)
        done = subprocess.run([*load, "--requests", str(requests), "--id-prefix", "run"],
                              check=True, capture_output=True, text=True)  # fmt: skip
        outcome["seconds"] = time.perf_counter() - began
        outcome["process_cpu"] = time.process_time() - cpu
        outcome["writer_cpu"] = thread_cpu(writer) - writer_cpu
        on_loop(lambda: loop_cpu.append(time.thread_time()))
        outcome["loop_cpu"] = loop_cpu[1] - loop_cpu[0]
        if profiled:
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
    return (pstats.Stats(profile) if profiled else None), outcome


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


class StepClock:
    """CPU µs per request of each step, timed over every request in turn."""

    def __init__(self) -> None:
        self.costs: dict[str, float] = {}

    def run(self, label: str, step, inputs: list) -> list:
        began = time.thread_time()
        outputs = [step(item) for item in inputs]
        self.costs[label] = (time.thread_time() - began) / len(inputs) * 1e6
        return outputs


def step_costs(svc, bodies: list[bytes], concurrency: int, tag: str) -> dict[str, float]:
    """CPU µs per request of each step of ``routers/predict.py``, in process, on the
    opened service ``svc`` (its real stores, champion and writer thread)."""
    from datetime import UTC, datetime

    from driftgate.serving import responses, schemas
    from driftgate.serving.jsonbody import unicode_json
    from driftgate.serving.metrics import MetricsMiddleware
    from driftgate.serving.outputs import score, usable
    from driftgate.serving.routers import predict as route

    model, settings, metrics = svc.champion.current, svc.settings, svc.metrics
    clock = StepClock()
    ids = [f"{tag}-{i}" for i in range(len(bodies))]
    data = clock.run("JSON parse", unicode_json, bodies)
    # The handler's reading of the parsed body (a plain body skips pydantic, when the
    # code has that path: the benchmark also runs on the code before it).
    plain = getattr(schemas, "plain_predict_request", lambda d: None)
    requests = clock.run(
        "request shape", lambda d: plain(d) or schemas.PredictRequest.model_validate(d), data
    )
    records = clock.run("normalise", lambda r: model.checker.normalise(r.records), requests)
    for request, normalised in zip(requests, records, strict=True):
        request.records = normalised
    clock.run("contract + model checks", lambda r: route._broken_fields(model, r), records)
    matrices = clock.run("encode (matrix)", model.encode, records)
    outputs = clock.run("score (backend)", model.predict, matrices)

    def shaped(output):
        assert usable(output, model.task, len(output), len(model.classes))
        return score(output, model.task, model.classes, settings.decision_threshold)

    scored = clock.run("outputs (usable + score)", shaped, outputs)
    received = datetime.now(UTC)

    client_key = getattr(svc, "client_key", svc.sampling.client_key)

    def samples_of(i: int) -> list:
        svc.sampling.keeps(ids[i])
        client = client_key("127.0.0.1")
        return route._samples(model, requests[i], ids[i], received, scored[i], 1.0, client)

    samples = clock.run("samples (sampling, client key)", samples_of, list(range(len(bodies))))
    # The hand-off and the group commit: ``concurrency`` requests at a time, as under
    # load; the requests log's rows ride with the commits.
    writer = next(t for t in threading.enumerate() if t.name == "sample-writer")
    handoff, writer_before = 0.0, thread_cpu(writer)
    for start in range(0, len(samples), concurrency):
        began = time.thread_time()
        futures = [svc.writer.submit(batch) for batch in samples[start : start + concurrency]]
        if svc.requests is not None:
            for _ in futures:
                svc.requests.add(200, 0.001, None)
        handoff += time.thread_time() - began
        for future in futures:
            future.result()
    clock.costs["hand-off to the writer (+ requests log)"] = handoff / len(bodies) * 1e6
    clock.costs["group commit (writer thread)"] = (
        (thread_cpu(writer) - writer_before) / len(bodies) * 1e6
    )

    # The metrics middleware's own work around a response (a no-op app answering 200).
    async def answered(scope, receive, send) -> None:
        await send({"type": "http.response.start", "status": 200})

    async def sent(message) -> None:
        pass

    middleware = MetricsMiddleware(answered, metrics)
    scope = {"type": "http", "path": "/predict"}

    def count(_) -> None:
        with contextlib.suppress(StopIteration):  # completes without suspending
            middleware(scope, None, sent).send(None)

    clock.run("metrics", count, bodies)

    def answer(i: int) -> bytes:
        body = {
            "request_id": ids[i], "model_name": model.name, "model_version": model.version,
            **scored[i].fields, "sample_stored": True,
        }  # fmt: skip
        if hasattr(responses, "RawJSONResponse"):  # the handler's answer, as it builds it
            headers = [(route.REQUEST_ID_HEADER_RAW, ids[i].encode()),
                       (route.SAMPLE_STORED_HEADER_RAW, b"true")]  # fmt: skip
            return responses.RawJSONResponse(responses.json_bytes(body), headers).body
        headers = {responses.REQUEST_ID_HEADER: ids[i], responses.SAMPLE_STORED_HEADER: "true"}
        return responses.SafeJSONResponse(body, headers=headers).body

    clock.run("response (bytes)", answer, list(range(len(bodies))))
    clock.costs["sum of the steps"] = sum(clock.costs.values())
    return clock.costs


def asgi_cost(app, bodies: list[bytes], concurrency: int, tag: str) -> dict[str, float]:
    """The whole app (every middleware, the handler, the commit) driven through ASGI in
    this process, ``concurrency`` requests in flight: CPU µs per request of the event
    loop's thread, of the writer's and of the process."""
    import asyncio

    async def one(body: bytes, request_id: str) -> int:
        scope = {
            "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1",
            "method": "POST", "scheme": "http", "path": "/predict", "raw_path": b"/predict",
            "query_string": b"", "root_path": "", "client": ("127.0.0.1", 50000),
            "server": ("127.0.0.1", 8080), "state": {},
            "headers": [
                (b"host", b"127.0.0.1"), (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                (b"x-request-id", request_id.encode()),
            ],
        }  # fmt: skip
        messages = [{"type": "http.request", "body": body, "more_body": False}]
        status = []

        async def receive():
            return messages.pop() if messages else {"type": "http.disconnect"}

        async def send(message) -> None:
            if message["type"] == "http.response.start":
                status.append(message["status"])

        await app(scope, receive, send)
        return status[0]

    async def drive() -> list[int]:
        queue = list(enumerate(bodies))
        statuses: list[int] = []

        async def worker() -> None:
            while queue:
                i, body = queue.pop()
                statuses.append(await one(body, f"{tag}-{i}"))

        await asyncio.gather(*(worker() for _ in range(concurrency)))
        return statuses

    try:  # the loop uvicorn runs the service on ("auto": uvloop when installed)
        import uvloop

        loop_factory = uvloop.new_event_loop
    except ImportError:
        loop_factory = None
    writer = next(t for t in threading.enumerate() if t.name == "sample-writer")
    loop_cpu, cpu, writer_cpu = time.thread_time(), time.process_time(), thread_cpu(writer)
    with asyncio.Runner(loop_factory=loop_factory) as runner:
        statuses = runner.run(drive())
    per = 1e6 / len(bodies)
    if set(statuses) != {200}:
        raise SystemExit(f"in-process ASGI run answered {sorted(set(statuses))}")
    return {
        "event loop thread": (time.thread_time() - loop_cpu) * per,
        "writer thread": (thread_cpu(writer) - writer_cpu) * per,
        "process": (time.process_time() - cpu) * per,
    }


def in_process(config, settings, bodies, concurrency: int, rounds: int) -> tuple[dict, dict]:
    """Medians over ``rounds`` of :func:`step_costs` and :func:`asgi_cost`."""
    from driftgate.serving.app import create_app
    from driftgate.serving.metrics import ServiceMetrics
    from driftgate.serving.state import close_service, open_service

    # Which contract is in effect, as create_app hands it to the lifespan (a callable:
    # the service reads it again at each champion poll).
    pinned = config.resolve(settings.contract) if settings.contract else None
    contract = (lambda: pinned) if pinned else config.contract_in_effect
    app = create_app(config, settings)
    svc = open_service(config, settings, contract, ServiceMetrics())
    app.state.service = svc  # as the lifespan does
    steps: list[dict] = []
    whole: list[dict] = []
    try:
        asgi_cost(app, bodies[:300], concurrency, "warm")
        for round_ in range(rounds):
            steps.append(step_costs(svc, bodies, concurrency, f"s{round_}"))
            whole.append(asgi_cost(app, bodies, concurrency, f"a{round_}"))
    finally:
        close_service(svc)
    return medians(steps), medians(whole)


def medians(runs: list[dict]) -> dict:
    return {key: statistics.median(run[key] for run in runs) for key in runs[0]}


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


def http_costs(config, settings, payload_file: Path, args, root: Path) -> dict[str, float]:
    """Medians over ``args.rounds`` runs under uvicorn over loopback HTTP, no profiler:
    CPU µs per request of the event loop's thread, the writer's and the process, and
    requests per second (each run on fresh stores: request ids are unique per store)."""
    runs = []
    for round_ in range(args.rounds):
        fresh = settings.model_copy(
            update={
                "sample_store_url": f"sqlite:///{root / f'{settings.backend}-http{round_}.db'}",
                "control_store_url": f"sqlite:///{root / f'{settings.backend}-c{round_}.db'}",
            }
        )
        _, outcome = serve_profiled(
            config, fresh, payload_file, args.requests, args.concurrency, profiled=False
        )
        per = 1e6 / args.requests
        runs.append({
            "event loop thread": outcome["loop_cpu"] * per,
            "writer thread": outcome["writer_cpu"] * per,
            "process": outcome["process_cpu"] * per,
            "requests/s": outcome["summary"]["requests_per_second"],
        })  # fmt: skip
    return medians(runs)


def print_steps(steps: dict, whole: dict, http: dict, rounds: int, requests: int) -> None:
    backends = list(steps)
    print(f"\nCPU µs per request, in process, median of {rounds} rounds of {requests} "
          f"one-record requests; load average {load_average()}")  # fmt: skip
    print(f"{'step':<42}" + "".join(f"{b:>13}" for b in backends))
    for label in steps[backends[0]]:
        print(f"{label:<42}" + "".join(f"{steps[b][label]:>13.1f}" for b in backends))
    print(f"\n{'whole request':<42}" + "".join(f"{b:>13}" for b in backends))
    for where in ("event loop thread", "writer thread", "process"):
        print(f"{'in process (ASGI), ' + where:<42}"
              + "".join(f"{whole[b][where]:>13.1f}" for b in backends))  # fmt: skip
    for where in ("event loop thread", "writer thread", "process"):
        print(f"{'over HTTP, ' + where:<42}"
              + "".join(f"{http[b][where]:>13.1f}" for b in backends))  # fmt: skip
    print(
        f"{'HTTP + uvicorn (process, HTTP - ASGI)':<42}"
        + "".join(f"{http[b]['process'] - whole[b]['process']:>13.1f}" for b in backends)
    )
    print(f"{'over HTTP, requests/s (client on the host)':<42}"
          + "".join(f"{http[b]['requests/s']:>13.1f}" for b in backends))  # fmt: skip


def load_average() -> str:
    return "/".join(f"{x:.1f}" for x in os.getloadavg())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=3000)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=3, help="in-process and HTTP runs")
    parser.add_argument("--backends", default="pyfunc,onnxruntime")
    parser.add_argument("--profile", action="store_true", help="also the cProfile run")
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

    backends = [b.strip() for b in args.backends.split(",") if b.strip()]
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        config, version, gate_seconds, onnx = prepare_project(root)
        print(f"gate with ONNX: {gate_seconds:.1f} s; {onnx.name}: {onnx.observed}, "
              f"{onnx.seconds:.1f} s")  # fmt: skip
        data = prepare_data(config)
        rows = data.splits.test[data.features].head(500).to_dict("records")
        payload_file = root / "payloads.json"
        payload_file.write_text(json.dumps([{"records": [r]} for r in rows]))
        bodies = [json.dumps({"records": [rows[i % len(rows)]]}).encode()
                  for i in range(args.requests)]  # fmt: skip
        steps, whole, http, table = {}, {}, {}, {}
        for backend in backends:
            settings = ServingSettings(
                backend=backend,
                sample_store_url=f"sqlite:///{root / f'{backend}.db'}",
                control_store_url=f"sqlite:///{root / f'{backend}-control.db'}",
            )
            steps[backend], whole[backend] = in_process(
                config, settings, bodies, args.concurrency, args.rounds
            )
            http[backend] = http_costs(config, settings, payload_file, args, root)
            if not args.profile:
                continue
            settings = settings.model_copy(
                update={"sample_store_url": f"sqlite:///{root / f'{backend}-profiled.db'}"}
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
        print_steps(steps, whole, http, args.rounds, args.requests)
        if table:
            print(
                f"\nprofiled: µs per request ({args.requests} one-record requests, "
                f"{args.concurrency} connections, cProfile on: CPU µs inflated by it)"
            )
            print(f"{'stage':<34}" + "".join(f"{b:>13}" for b in table))
            for label in table[backends[0]]:
                print(f"{label:<34}" + "".join(f"{table[b][label]:>13.0f}" for b in table))
        print("\nscorer alone, one row (µs per call, no profiler):")
        for label, micro in scorer_micro(
            config.tracking, config.model.name, version, len(data.features)
        ).items():
            print(f"  {label:<40}{micro:>8.1f}")


if __name__ == "__main__":
    main()
