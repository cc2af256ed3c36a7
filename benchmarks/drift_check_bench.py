"""Benchmark: the drift check where users wait (issue 32).

Not a test. Run ``python benchmarks/drift_check_bench.py``. It builds a throw-away
project (the demo model trained and promoted with the demo's gate, in a temporary
folder), stores a 30-row window and the demo's 8,159-row production window in its
sample store, then prints:

* ``driftgate drift-check`` of each window in fresh processes (``--runs`` + 1 each,
  wall time and the child's CPU time user+sys): the first run of each (no null kept on
  disk yet) and the median of the rest; the Evidently report renders in a background
  process after the verdict (how long after is printed, and waited for before the next
  run), and a last row renders it in the command (``--wait-for-report``);
* the same 8,159-row window judged in this process (:func:`judge_window`, the report
  rendered in process): first, then the median of ``--runs`` warm checks, with the
  per-step breakdown (store reads, contract, summary, drift statistics, null builds,
  MLflow run, actions, Evidently report) and "judged": the steps up to the actions,
  what a user waits for;
* the slowest imports of the 30-row check (``python -X importtime``, ``--top`` lines).

Every figure depends on the machine's load: the load average is printed beside them.
"""

from __future__ import annotations

import argparse
import functools
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from contextlib import contextmanager
from pathlib import Path

# Run as a script, this folder is on sys.path but the repository root is not.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.cli_bench import importtime

BIN = Path(sys.executable).parent
BIG_DAY = "2040-01-01"  # the 8,159-row window: [BIG_DAY, +1 day)
SMALL_DAY = "2041-01-01"  # the 30-row window: [SMALL_DAY, +1 hour)


def load_average() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def setup(root: Path, window_rows: int, small_rows: int) -> Path:
    """A trained, promoted demo project under ``root`` with both windows stored."""
    import pandas as pd

    from driftgate.config import load_config
    from driftgate.gates.config import load_gate_config
    from driftgate.jobs.data import prepare_data
    from driftgate.jobs.promote import run_promotion
    from driftgate.jobs.train import run_training
    from driftgate.stores.samples import Sample, SqlSampleStore

    path = root / "driftgate.yaml"
    # The committed gate config (its monitors: KL per feature, missing share); no
    # catch-up, so each run judges exactly the window asked for.
    gates = Path(__file__).resolve().parents[1] / "gates" / "gates.yaml"
    path.write_text(
        f"home: state\ngates: {gates}\nserving:\n  accept_client_timestamps: true\n"
        "monitoring:\n  max_catch_up_windows: 0\n"
    )
    config = load_config(path)
    version = run_training(config, on_epoch=None).registered.version
    gate = run_promotion(config, load_gate_config(gates), version)
    if not gate.promoted:
        raise SystemExit(f"the demo model failed its gate:\n{gate.result.table()}")
    data = prepare_data(config)
    production = data.splits.production[data.features]
    store = SqlSampleStore(config.serving.sample_store(config.home_dir))
    for day, rows, span in (
        (BIG_DAY, production.head(window_rows), pd.Timedelta(days=1)),
        (SMALL_DAY, production.tail(small_rows), pd.Timedelta(hours=1)),
    ):
        start = pd.Timestamp(day, tz="UTC")
        step = span / (len(rows) + 1)
        store.append([
            Sample(timestamp=start + i * step, request_id=f"{day}-{i}", record_index=0,
                   model_name=config.model.name, model_version=version,
                   features=dict(zip(data.features, map(float, row), strict=True)),
                   prediction=0.5, predicted_class=1)
            for i, row in enumerate(rows.itertuples(index=False))
        ])  # fmt: skip
    store.close()
    return path


def cli_command(config: Path, day: str, window: str, end_offset: str) -> list[str]:
    import pandas as pd

    end = (pd.Timestamp(day, tz="UTC") + pd.Timedelta(end_offset)).isoformat()
    return [str(BIN / "driftgate"), "drift-check", "--config", str(config),
            "--window", window, "--end", end]  # fmt: skip


def timed_process(command: list[str]) -> tuple[float, float, str]:
    """Wall time, the child's CPU time (user + sys) and output of one fresh process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode not in (0, 1):  # 1: a monitor breached (still a judged window)
        raise SystemExit(f"{' '.join(command)} failed:\n{done.stderr[-3000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, done.stdout


def background_report(output: str, timeout: float = 600.0) -> float | None:
    """Seconds until the background Evidently report of a ``drift-check`` run (its
    summary path in ``output``) logged its end; None without one. Waited for, so that
    it does not slow the next run down."""
    summaries = [
        line[len("report: ") :] for line in output.splitlines() if line.startswith("report: ")
    ]
    if not summaries:
        return None
    log = Path(summaries[-1]).parent / "evidently.log"
    if not log.is_file():  # created before the background process starts: none started
        return None
    start = time.perf_counter()
    while time.perf_counter() - start < timeout:
        if log.is_file() and log.read_text().strip():
            return time.perf_counter() - start
        time.sleep(0.2)
    return None


def fresh_runs(command: list[str], runs: int, nulls_on_disk: Path) -> list[tuple[float, float]]:
    """``runs`` timed fresh processes, the first with no null kept on disk; each waits
    for the previous one's background report (its log emptied first)."""
    shutil.rmtree(nulls_on_disk, ignore_errors=True)
    timings, waited = [], []
    for _ in range(runs):
        for log in nulls_on_disk.parents[2].glob("reports/drift/*/evidently.log"):
            log.unlink()
        wall, cpu, output = timed_process(command)
        timings.append((wall, cpu))
        extra = background_report(output)
        if extra is not None:
            waited.append(extra)
    if waited:
        print(
            f"    (its background Evidently report ended {statistics.median(waited):.2f} s "
            "after the command, median)"
        )
    return timings


class StepClock:
    """Seconds per named part of one check: the job's steps (a step runner) and the
    functions inside them that a user waits on (wrapped for the benchmark only)."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = defaultdict(float)
        self._depth: dict[str, int] = defaultdict(int)

    def __call__(self, name, fn, /, *args, **kwargs):
        with self.part(f"step {name}"):
            return fn(*args, **kwargs)

    @contextmanager
    def part(self, name: str):
        self._depth[name] += 1
        start = time.perf_counter()
        try:
            yield
        finally:
            self._depth[name] -= 1
            if self._depth[name] == 0:  # a recursive call counts once
                self.seconds[name] += time.perf_counter() - start

    def wrap(self, owner, attribute: str, label: str) -> None:
        original = getattr(owner, attribute)

        @functools.wraps(original)
        def timed(*args, **kwargs):
            with self.part(label):
                return original(*args, **kwargs)

        setattr(owner, attribute, timed)


def instrument(clock: StepClock) -> None:
    """Time the parts inside the steps (by wrapping the module attributes they call)."""
    from driftgate import data_contracts, monitors, registry
    from driftgate.monitors import nulls, report

    clock.wrap(data_contracts, "validate_batch", "  contract (validate_batch)")
    clock.wrap(monitors, "check_drift_counts", "  evidence statistics (check_drift_counts)")
    clock.wrap(nulls, "_build_binned_null", "  binned null builds (cache misses)")
    clock.wrap(registry, "log_monitoring_run", "  MLflow run (log_monitoring_run)")
    clock.wrap(report, "render_evidently_report", "  Evidently report")


def in_process(config_path: Path, runs: int) -> list[dict[str, float]]:
    """The 8,159-row window judged ``runs + 1`` times in this process, timed by part."""
    import pandas as pd

    from driftgate.config import load_config
    from driftgate.gates.config import load_gate_config
    from driftgate.jobs.drift_check import judge_window
    from driftgate.monitors import nulls
    from driftgate.monitors.stattests.ks import ks_p_value

    config = load_config(config_path)
    gates = load_gate_config(config.gates)
    start = pd.Timestamp(BIG_DAY, tz="UTC")
    nulls.clear_cache()  # in memory: the first check here builds or reads its nulls
    figures = []
    for repeat in range(runs + 1):
        clock = StepClock()
        instrument(clock)
        began = time.perf_counter()
        cpu = time.process_time()
        # A later end each time: a new window (same rows), judged and recorded afresh.
        # Its KS p-values are computed again, as a new window's D would be (cached by
        # value: the same rows would hit the cache); the nulls stay cached by size.
        ks_p_value.cache_clear()
        judge_window(config, gates, start, start + pd.Timedelta(days=1 + repeat), run_step=clock)
        figures.append(
            {
                "total": time.perf_counter() - began,
                "cpu": time.process_time() - cpu,
                **clock.seconds,
            }
        )
        uninstrument()
    return figures


def uninstrument() -> None:
    """Unwrap what :func:`instrument` wrapped (each run gets a fresh clock)."""
    from driftgate import data_contracts, monitors, registry
    from driftgate.monitors import nulls, report

    for owner, attribute in (
        (data_contracts, "validate_batch"),
        (monitors, "check_drift_counts"),
        (nulls, "_build_binned_null"),
        (registry, "log_monitoring_run"),
        (report, "render_evidently_report"),
    ):
        original = getattr(owner, attribute)
        setattr(owner, attribute, getattr(original, "__wrapped__", original))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3, help="warm runs after the first")
    parser.add_argument("--window-rows", type=int, default=8_159)
    parser.add_argument("--small-rows", type=int, default=30)
    parser.add_argument("--top", type=int, default=15, help="import-time lines to print")
    parser.add_argument(
        "--keep", help="project folder to set up once and reuse (default: a temporary one)"
    )
    parser.add_argument(
        "--only",
        default="cli,in-process,imports",
        help="parts to run: cli (or one of its row labels), in-process, imports",
    )
    args = parser.parse_args()
    os.environ.setdefault("PYTHONWARNINGS", "ignore")

    with tempfile.TemporaryDirectory() as scratch:
        root = Path(args.keep or scratch)
        config = root / "driftgate.yaml"
        if not config.is_file():
            print(f"setting up (train, promote, store windows); load {load_average()}", flush=True)
            root.mkdir(parents=True, exist_ok=True)
            config = setup(root, args.window_rows, args.small_rows)

        print("\n`driftgate drift-check` in fresh processes (wall / CPU user+sys):")
        small = cli_command(config, SMALL_DAY, "1h", "1h")
        for label, command in (
            (f"{args.small_rows}-row window", small),
            (f"{args.window_rows}-row window", cli_command(config, BIG_DAY, "1d", "1d")),
            (f"{args.small_rows} rows, --wait-for-report", [*small, "--wait-for-report"]),
        ):
            if label not in args.only and "cli" not in args.only:
                continue
            # The champion's profile folder appears with the first check of a new
            # project: looked up before each row (none yet: nothing to remove).
            profiles = root / "state" / "profiles"
            found = next(profiles.glob("*"), None) if profiles.is_dir() else None
            nulls_on_disk = (found or profiles / "none-yet") / "nulls"
            runs = fresh_runs(command, args.runs + 1, nulls_on_disk)
            rest = runs[1:]
            print(
                f"  {label:<32} first {runs[0][0]:6.2f} s / {runs[0][1]:6.2f} s CPU; "
                f"then median {statistics.median(w for w, _ in rest):6.2f} s / "
                f"{statistics.median(c for _, c in rest):6.2f} s CPU "
                f"(runs: {', '.join(f'{w:.2f}' for w, _ in runs)}); load {load_average()}",
                flush=True,
            )
        help_runs = [timed_process([str(BIN / "driftgate"), "--help"]) for _ in range(5)]
        print(
            f"  {'driftgate --help':<32} median "
            f"{statistics.median(w for w, _, _ in help_runs):6.2f} s / "
            f"{statistics.median(c for _, c, _ in help_runs):6.2f} s CPU; load {load_average()}"
        )

        if "in-process" in args.only:
            print(f"\n{args.window_rows}-row window judged in this process (seconds):")
            figures = in_process(config, args.runs)
            names = sorted({k for f in figures for k in f if k not in ("total", "cpu")})
            warm = figures[1:]
            print(f"  {'part':<48} {'first':>8} {'warm median':>12}")
            for figure in figures:  # what a user waits for: the verdict and the actions
                figure["judged"] = figure["total"] - figure.get("step report", 0.0)
            for name in ["judged", "total", "cpu", *names]:
                label = {
                    "judged": "judged: read .. act (wall)",
                    "total": "total, report included (wall)",
                    "cpu": "total (CPU user+sys)",
                }.get(name, name)
                print(
                    f"  {label:<48} {figures[0].get(name, 0.0):8.3f} "
                    f"{statistics.median(f.get(name, 0.0) for f in warm):12.3f}"
                )
            print(f"  load {load_average()}")

        if "imports" not in args.only:
            return
        print(
            f"\nslowest imports of the {args.small_rows}-row check (-X importtime, top {args.top}):"
        )
        for cumulative, name in importtime(small, args.top):
            print(f"  {cumulative / 1e6:7.3f} s  {name}")


if __name__ == "__main__":
    main()
