"""Service throughput and latency next to `mlflow models serve`, and drift-check time.

One run, same machine, same registered model (the demo classifier, gated with the
demo's gates.yaml, whose export_parity logs its ONNX export):
- `driftgate serve` on `serving.backend: pyfunc` and on `onnxruntime` (contract
  validation + prediction + durable group-commit logging of every sample to SQLite,
  synchronous=FULL; also without the requests log, and with a third of the requests
  refused by the contract, their records logged as rejected traffic, and with that
  logging off)
  vs `mlflow models serve --env-manager local` (prediction only, no logging), all
  loaded from loopback by benchmarks/loadgen.py with one record per request, for
  `--seconds` each;
- the **bare-FastAPI ceiling**: a minimal FastAPI app (``bare_app``) answering the same
  JSON shape, under the same uvicorn settings as `driftgate serve` (the same loop, the
  same HTTP protocol with the request-head limit, one worker, no access log), with no
  validation, no model and no logging: each server's share of it is printed, and
  each server's CPU per answered request (its process group's user + system time
  during the timed run, from /proc: steadier than requests/s on a shared machine);
- the drift-check job (`judge_window`) on a window of `--window-rows` stored samples:
  contract (GX), drift statistics, MLflow run with the Evidently report.

With ``--slices N`` the servers run side by side and are loaded in turns (each
server's ``--seconds`` split into N), so that a machine whose speed drifts from minute
to minute drifts under all of them alike (``run_interleaved``).

Run: .venv/bin/python benchmarks/serving_bench.py [--seconds 10] [--concurrency 16]
     [--servers ceiling,onnxruntime,pyfunc,mlflow] [--slices 8] [--no-drift-check]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
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


def group_cpu_seconds(pgid: int) -> float:
    """User + system CPU seconds of the live processes of process group ``pgid`` (the
    server and any child serving for it, as `mlflow models serve`'s uvicorn), from
    /proc; 0.0 where /proc is not there. Processes that already exited are not counted."""
    total = 0.0
    tick = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    for entry in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = entry.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue  # exited meanwhile, or not readable
        if int(fields[2]) == pgid:  # after the name: state, ppid, pgrp, ...
            total += (int(fields[11]) + int(fields[12])) / tick
    return total


def warm_up(url: str, payloads: list[dict], concurrency: int, run: str) -> None:
    """200 requests before any timed one (connections, caches, the first commits)."""
    # Run as a script, this folder is on sys.path but the repository root is not.
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from benchmarks.loadgen import run_load

    # Request ids unique per run: the driftgate runs share one sample store, where a
    # reused id is refused (409) and would count as a failed request.
    asyncio.run(
        run_load(url, payloads[:50], concurrency=concurrency, total=200, id_prefix=f"warm{run}")
    )


def timed_load(
    url: str, payloads: list[dict], seconds: float, concurrency: int, run: str,
    cpu: Callable[[], float] | None = None,
) -> tuple:  # fmt: skip
    """One timed load: the loadgen's result and the server's CPU seconds meanwhile."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from benchmarks.loadgen import run_load

    cpu_before = cpu() if cpu is not None else 0.0
    result = asyncio.run(
        run_load(url, payloads, concurrency=concurrency, duration=seconds, id_prefix=f"run{run}")
    )
    return result, (cpu() - cpu_before if cpu is not None else 0.0)


def summarise(parts: list[tuple]) -> dict:
    """One server's figures from its timed loads ``parts`` ((result, cpu seconds) each):
    requests per second over their summed durations, latency percentiles over all."""
    from benchmarks.loadgen import LoadResult

    merged = LoadResult()
    cpu_used = 0.0
    for result, cpu in parts:
        merged.statuses.update(result.statuses)
        merged.latencies.extend(result.latencies)
        merged.errors += result.errors
        merged.seconds += result.seconds
        merged.first_error = merged.first_error or result.first_error
        cpu_used += cpu
    summary = merged.summary()
    # Answered requests: 200s and the contract's 422s (the refused traffic is traffic).
    answered = sum(1 for status in merged.statuses.values() if status in (200, 422))
    summary["answered_per_second"] = round(answered / merged.seconds, 1) if merged.seconds else 0.0
    # The server's CPU per answered request: steadier than requests/s on a shared machine
    # (the client's CPU is not in it; the timed runs only, not the warm-up).
    summary["cpu_us_per_request"] = round(cpu_used / answered * 1e6, 1) if answered else 0.0
    summary["refused"] = sum(1 for status in merged.statuses.values() if status == 422)
    summary["first_error"] = merged.first_error
    others = sorted({s for s in merged.statuses.values() if s not in (200, 422, 0)})
    if others:
        summary["first_error"] += f" statuses {others}"
    return summary


def load(
    url: str, payloads: list[dict], seconds: float, concurrency: int, run: str,
    cpu: Callable[[], float] | None = None,
) -> dict:  # fmt: skip
    warm_up(url, payloads, concurrency, run)
    return summarise([timed_load(url, payloads, seconds, concurrency, run, cpu)])


def launch(make_command: Callable[[int], list[str]], log_path: Path, env: dict) -> tuple:
    """Start a server on a free port, its output in ``log_path``: (process, base URL)."""
    port = free_port()
    with open(log_path, "wb") as log:
        process = subprocess.Popen(
            make_command(port), stdout=log, stderr=subprocess.STDOUT, env=env,
            start_new_session=True,  # its own process group: children stop with it
        )  # fmt: skip
    return process, f"http://127.0.0.1:{port}"


def run_server(key: str, server: tuple, log_path: Path, env: dict, args, run_id: str) -> dict:
    """Start one server on a port of its own, load it, stop it and every process it
    started; the summary says why when requests failed (``why``).

    Why a port per start and a process group: in one run (7 December 2026) `mlflow
    models serve` answered nothing in its second round (16 errors: each connection's
    first request failed). It serves through a `uvicorn` child process; reusing the
    previous round's port right after stopping it leaves room for a child still
    shutting down there, and the readiness probe cannot tell which process answered.
    Now each start gets a fresh port, the whole process group is stopped (SIGTERM,
    then SIGKILL) before the next server starts, and a server that answered nothing
    is reported with the client's first error and the end of its log.
    """
    make_command, ready_path, url_path, payloads = server
    process, base = launch(make_command, log_path, env)
    try:
        wait_ready(base + ready_path, process)
        before = load_average()
        summary = load(base + url_path, payloads, args.seconds, args.concurrency, run_id,
                       cpu=lambda: group_cpu_seconds(process.pid))  # fmt: skip
        summary["load"] = f"{before}>{load_average()}"
    except (RuntimeError, TimeoutError) as exc:  # never became ready
        summary = {"ok": 0, "requests_per_second": 0.0, "answered_per_second": 0.0,
                   "refused": 0, "p50_ms": 0.0, "p99_ms": 0.0, "errors": 0,
                   "cpu_us_per_request": 0.0,
                   "first_error": f"not ready: {exc}", "load": load_average()}  # fmt: skip
    finally:
        stop_group(process)
    summary["why"] = ""
    if summary["errors"] or not summary["ok"]:
        tail = log_path.read_text(errors="replace").strip().splitlines()[-5:]
        summary["why"] = f"{summary['first_error'] or 'no 200s'}; server log: {' | '.join(tail)}"
    return summary


def run_interleaved(keys: list[str], servers: dict, root: Path, env: dict, args,
                    round_: int) -> dict:  # fmt: skip
    """``--slices``: every chosen server started and warmed up, then loaded in turns of
    ``--seconds / --slices`` (the order reversed every other turn), so that each one's
    requests per second spans the same minutes of the machine as the others'.

    Why: on a shared machine the speed of the cores drifts from minute to minute (7
    December 2026: the ceiling answered 2,760 to 5,135 requests a second in four rounds
    minutes apart, its CPU per request 194 to 361 µs), and a ratio of two servers run
    one after the other inherits that drift; turns average it out. A server left
    idle meanwhile only runs its pollers.

    Turns flatter a server that writes to disk: between its turns the disk catches up
    on write-back. The same minutes of 7 December 2026 gave driftgate onnxruntime
    59-61% of the ceiling in turns of 3 s and 39-47% in turns of 10 s (sequential
    runs of 8 s: 31-61%). Use turns of 10 s or more for a figure of sustained load."""
    started, parts = {}, {key: [] for key in keys}
    try:
        for key in keys:
            make_command, ready_path, url_path, payloads = servers[key]
            process, base = launch(make_command, root / f"{key}-{round_}-interleaved.log", env)
            started[key] = (process, base)
            wait_ready(base + ready_path, process)
            warm_up(base + url_path, payloads, args.concurrency, f"{round_}-{key}")
        before = load_average()
        for turn in range(args.slices):
            for key in keys if turn % 2 == 0 else keys[::-1]:
                process, base = started[key]
                _, _, url_path, payloads = servers[key]
                parts[key].append(timed_load(
                    base + url_path, payloads, args.seconds / args.slices, args.concurrency,
                    f"{round_}-{key}-{turn}", cpu=lambda pid=process.pid: group_cpu_seconds(pid),
                ))  # fmt: skip
        after = load_average()
    finally:
        for process, _ in started.values():
            stop_group(process)
    results = {}
    for key in keys:
        results[key] = summarise(parts[key])
        results[key]["load"] = f"{before}>{after}"
        results[key]["why"] = (
            results[key]["first_error"] or "no 200s"
            if results[key]["errors"] or not results[key]["ok"] else ""
        )  # fmt: skip
    return results


def stop_group(process: subprocess.Popen, timeout: float = 30.0) -> None:
    """SIGTERM to the server's process group, SIGKILL to whatever is left after
    ``timeout`` (a child serving for it included)."""
    import signal

    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(timeout=timeout)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)  # the group's children, if any remain
    process.wait(timeout=timeout)


def bare_app():
    """The ceiling: FastAPI + uvicorn answering /predict's JSON shape, nothing else (no
    validation, no model, no logging, no metrics): what the framework alone costs."""
    from fastapi import FastAPI, Request

    app = FastAPI()

    async def predict(request):
        records = (await request.json())["records"]
        return {
            "request_id": request.headers.get("x-request-id", ""),
            "model_name": "bare",
            "model_version": "1",
            "probabilities": [0.5] * len(records),
            "classes": [1] * len(records),
            "sample_stored": False,
        }

    # Set here, not written as `request: Request`: this module's annotations are strings
    # (`from __future__ import annotations`) that FastAPI would resolve in its globals.
    predict.__annotations__ = {"request": Request}
    app.post("/predict")(predict)

    @app.get("/readyz")
    async def ready():
        return {"ready": True}

    return app


def run_bare(port: int) -> None:
    """``bare_app`` under uvicorn as ``serving/server.py:run`` starts driftgate's."""
    import uvicorn

    from driftgate.serving.server import GRACEFUL_SHUTDOWN_SECONDS, uvicorn_limits

    uvicorn.run(
        bare_app(), host="127.0.0.1", port=port, log_level="warning", access_log=False,
        timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_SECONDS, lifespan="on", **uvicorn_limits(),
    )  # fmt: skip


# (key, label) of every server, in the order they run; --servers picks by key.
SERVERS = {
    "ceiling": "bare FastAPI (ceiling)",
    "onnxruntime": "driftgate onnxruntime",
    "pyfunc": "driftgate pyfunc",
    "norequests": "  pyfunc, no requests log",
    "refused": "  pyfunc, 1/3 refused",
    "refused-unlogged": "  ...refused unlogged",
    "mlflow": "mlflow models serve",
}


def print_table(results: dict, seconds: float, concurrency: int) -> None:
    ceiling = results.get("ceiling", {}).get("requests_per_second")
    print(f"\n{seconds:g} s per server, {concurrency} connections, 1 record/request")
    print(
        f"{'server':<27}{'answered/s':>11}{'200/s':>9}{'422s':>7}{'p50 ms':>9}{'p99 ms':>9}"
        f"{'errors':>8}{'of ceiling':>12}{'CPU µs/req':>12}  {'load':<18}"
    )
    for key in [k for k in SERVERS if k in results]:
        summary = results[key]
        share = f"{summary['requests_per_second'] / ceiling:.1%}" if ceiling else "-"
        if summary.get("why"):
            print(f"{SERVERS[key]:<27}FAILED or partly failed: {summary['why']}")
        print(
            f"{SERVERS[key]:<27}{summary['answered_per_second']:>11.1f}"
            f"{summary['requests_per_second']:>9.1f}{summary['refused']:>7}"
            f"{summary['p50_ms']:>9.2f}{summary['p99_ms']:>9.2f}{summary['errors']:>8}"
            f"{share:>12}{summary['cpu_us_per_request']:>12.1f}  {summary['load']:<18}"
        )

    def rate(key: str) -> float | None:
        return results[key]["requests_per_second"] if key in results else None

    def ratio(text: str, ours: float | None, peer: float | None, note: str = "") -> None:
        if ours is not None and peer:
            print(f"{text}: {ours / peer:.2f}x{note}")

    ratio("driftgate onnxruntime / bare FastAPI", rate("onnxruntime"), ceiling)
    ratio("driftgate pyfunc / bare FastAPI", rate("pyfunc"), ceiling)
    ratio("mlflow models serve / bare FastAPI", rate("mlflow"), ceiling)
    ratio("driftgate pyfunc / mlflow models serve", rate("pyfunc"), rate("mlflow"),
          " (driftgate also validates and durably logs every sample)")  # fmt: skip
    ratio("driftgate onnxruntime / mlflow models serve", rate("onnxruntime"), rate("mlflow"))
    ratio("pyfunc with / without the requests log", rate("pyfunc"), rate("norequests"))
    if "refused" in results:
        answered = results["refused"]["answered_per_second"]
        ratio("pyfunc with 1/3 refused, refused records logged / mlflow (answered requests)",
              answered, rate("mlflow"))  # fmt: skip
        if "refused-unlogged" in results:
            ratio("  logged / unlogged refused records", answered,
                  results["refused-unlogged"]["answered_per_second"])  # fmt: skip


def load_average() -> str:
    return "/".join(f"{x:.1f}" for x in os.getloadavg()[:2])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--window-rows", type=int, default=10_000)
    parser.add_argument(
        "--servers", default=",".join(SERVERS),
        help=f"comma-separated, of {', '.join(SERVERS)} (default: all)",
    )  # fmt: skip
    parser.add_argument("--rounds", type=int, default=1, help="run the servers this many times")
    parser.add_argument(
        "--slices", type=int, default=1,
        help="load the servers in turns: each one's --seconds split into this many turns, "
        "all servers up meanwhile (1: one server after the other, each started alone)",
    )  # fmt: skip
    parser.add_argument("--no-drift-check", action="store_true", help="skip the drift check")
    parser.add_argument("--bare-server", type=int, metavar="PORT", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.bare_server:
        run_bare(args.bare_server)
        return
    chosen = [key.strip() for key in args.servers.split(",") if key.strip()]
    unknown = sorted(set(chosen) - set(SERVERS))
    if unknown:
        parser.error(f"--servers: unknown {', '.join(unknown)}; known: {', '.join(SERVERS)}")

    from driftgate.config import load_config
    from driftgate.gates.config import load_gate_config
    from driftgate.jobs.promote import run_promotion
    from driftgate.jobs.train import run_training

    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        port_dg = free_port()  # in the configs only; each start passes --port (run_server)
        (root / "driftgate.yaml").write_text(
            f"home: state\nserving:\n  port: {port_dg}\n  accept_client_timestamps: true\n"
        )
        # The same project without the requests log (status and latency per request,
        # issue 16): the accepted path as it was before it.
        (root / "driftgate-norequests.yaml").write_text(
            f"home: state\nserving:\n  port: {port_dg}\n  accept_client_timestamps: true\n"
            "  log_requests: false\n"
        )
        # The same project on the ONNX Runtime backend (the gate's exports/model.onnx).
        (root / "driftgate-onnx.yaml").write_text(
            f"home: state\nserving:\n  port: {port_dg}\n  accept_client_timestamps: true\n"
            "  backend: onnxruntime\n"
        )
        # The same project with rejected-record logging off (the peer of the mixed run).
        (root / "driftgate-unlogged.yaml").write_text(
            f"home: state\nserving:\n  port: {port_dg}\n  accept_client_timestamps: true\n"
            "  log_rejected: false\n"
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
        # Every third request refused by the contract (sea-level pressure out of range):
        # the demo's production from 1982 on refuses about 40-70% of its days.
        mixed = [
            {"records": [{**r, "sea_level_pressure": 5.0} if i % 3 == 0 else r]}
            for i, r in enumerate(rows)
        ]
        one_record = [{"records": [r]} for r in rows]

        def serve(config_name: str):
            return lambda port: [sys.executable, "-m", "driftgate.cli", "serve", "--port",
                                 str(port), "--config", str(root / config_name)]  # fmt: skip

        ours = ("/readyz", "/predict")
        # key -> (command for a port, readiness path, request path, payloads)
        servers = {
            "ceiling": (
                lambda port: [sys.executable, str(Path(__file__).resolve()), "--bare-server",
                              str(port)],
                *ours, one_record,
            ),
            "onnxruntime": (serve("driftgate-onnx.yaml"), *ours, one_record),
            "pyfunc": (serve("driftgate.yaml"), *ours, one_record),
            "norequests": (serve("driftgate-norequests.yaml"), *ours, one_record),
            "refused": (serve("driftgate.yaml"), *ours, mixed),
            "refused-unlogged": (serve("driftgate-unlogged.yaml"), *ours, mixed),
            "mlflow": (
                lambda port: [str(Path(sys.executable).with_name("mlflow")), "models", "serve",
                 "-m", f"models:/{config.model.name}/{version}", "--env-manager", "local",
                 "--host", "127.0.0.1", "-p", str(port), "--workers", "1"],
                "/ping", "/invocations",
                [{"inputs": [[r[f] for f in data.features]]} for r in rows],
            ),
        }  # fmt: skip
        for round_ in range(args.rounds):
            results = {}
            order = [k for k in SERVERS if k in chosen]
            if args.slices > 1:
                results = run_interleaved(order, servers, root, env, args, round_)
                if args.rounds > 1:
                    print(f"\nround {round_ + 1} of {args.rounds}")
                print_table(results, args.seconds, args.concurrency)
                continue
            # Every other round in reverse: a machine whose load drifts during a round
            # favours the servers run last, and the reversed round undoes that.
            for key in order if round_ % 2 == 0 else order[::-1]:
                for attempt in (1, 2):  # a server that answers nothing gets one restart
                    log_path = root / f"{key}-{round_}-{attempt}.log"
                    results[key] = run_server(
                        key, servers[key], log_path, env, args, f"{round_}-{key}-{attempt}"
                    )
                    if results[key]["ok"] or attempt == 2:
                        break
                    print(f"  {SERVERS[key].strip()} answered nothing "
                          f"({results[key]['why']}); starting it again", flush=True)  # fmt: skip
            if args.rounds > 1:
                print(f"\nround {round_ + 1} of {args.rounds}")
            print_table(results, args.seconds, args.concurrency)
        print("load: 1- and 5-minute load averages before > after each server's run")
        if args.no_drift_check:
            return

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
