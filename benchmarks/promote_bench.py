"""Wall time of `driftgate promote` on the demo model, broken down by check.

Trains and registers the demo model once in a temporary store, then times:
- the whole CLI command in a fresh process (what CI pays, imports included),
- `evaluate_gates` in-process, repeated, with each check's own time.

Run: .venv/bin/python benchmarks/promote_bench.py [--repeats 5]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()

    from driftgate.config import load_config
    from driftgate.gates.config import load_gate_config
    from driftgate.jobs.promote import evaluate_gates
    from driftgate.jobs.train import run_training

    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        (root / "driftgate.yaml").write_text("home: state\n")
        config = load_config(root / "driftgate.yaml")
        started = time.perf_counter()
        version = run_training(config, on_epoch=None).registered.version
        print(f"train + register (setup): {time.perf_counter() - started:.2f} s")
        gates = load_gate_config()

        per_check: dict[str, list[float]] = defaultdict(list)
        totals = []
        for _ in range(args.repeats):
            started = time.perf_counter()
            result = evaluate_gates(config, gates, version)
            totals.append(time.perf_counter() - started)
            for check in result.checks:
                per_check[check.name].append(check.seconds)

        started = time.perf_counter()
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "driftgate.cli",
                "promote",
                "--config",
                str(root / "driftgate.yaml"),
            ],
            capture_output=True,
            text=True,
        )
        cli_seconds = time.perf_counter() - started
        if done.returncode != 0:
            sys.exit(f"promote failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")

    total = statistics.median(totals)
    print(f"\n`driftgate promote` in a fresh process: {cli_seconds:.2f} s (exit 0)")
    print(f"evaluate_gates in-process, median of {args.repeats}: {total:.3f} s\n")
    print(f"{'check':<28}{'median s':>10}{'share':>8}")
    accounted = 0.0
    for name, seconds in per_check.items():
        median = statistics.median(seconds)
        accounted += median
        print(f"{name:<28}{median:>10.4f}{median / total:>8.1%}")
    rest = total - accounted
    print(f"{'(loading data, contract, models)':<28}{rest:>10.4f}{rest / total:>8.1%}")


if __name__ == "__main__":
    main()
