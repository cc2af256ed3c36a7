"""Benchmark: the cold CLI, ``driftgate --help`` in a fresh process (issue 32).

Not a test. Run ``python benchmarks/cli_bench.py``. Prints, each the median of
``--runs`` fresh processes, interleaved so that a busy machine slows every contender
alike:

* ``python -c pass``: the interpreter's own start-up, the floor of any command;
* ``import driftgate.cli``: what every command pays before it does anything;
* ``driftgate --help``: the console script of this checkout;
* ``--peer SCRIPT``: another install's console script in the same run (e.g. the main
  branch's ``.venv/bin/driftgate``: before and after, measured side by side);

then the slowest imports of ``driftgate --help`` from ``python -X importtime``
(cumulative microseconds; ``--top`` lines).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

BIN = Path(sys.executable).parent


def _wall_time(command: list[str]) -> float:
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed:\n{done.stderr[-2000:]}")
    return seconds


def importtime(command: list[str], top: int) -> list[tuple[int, str]]:
    """The ``top`` largest cumulative import times of ``command`` (a Python script)."""
    done = subprocess.run(
        [sys.executable, "-X", "importtime", *command], capture_output=True, text=True, check=False
    )
    rows = []
    for line in done.stderr.splitlines():
        if not line.startswith("import time:") or "cumulative" in line:
            continue
        _self, cumulative, name = line[len("import time:") :].split("|")
        rows.append((int(cumulative), name.rstrip()))
    return sorted(rows, reverse=True)[:top]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=9, help="fresh processes per contender")
    parser.add_argument("--peer", help="another driftgate console script, timed alike")
    parser.add_argument("--top", type=int, default=15, help="import-time lines to print")
    args = parser.parse_args()

    contenders = {
        "python -c pass": [sys.executable, "-c", "pass"],
        "import driftgate.cli": [sys.executable, "-c", "import driftgate.cli"],
        "driftgate --help": [str(BIN / "driftgate"), "--help"],
    }
    if args.peer:
        contenders[f"peer: {args.peer} --help"] = [args.peer, "--help"]
    times: dict[str, list[float]] = {name: [] for name in contenders}
    for _ in range(args.runs):
        for name, command in contenders.items():
            times[name].append(_wall_time(command))

    floor = statistics.median(times["python -c pass"])
    print(f"median of {args.runs} fresh processes each (interleaved):")
    for name, samples in times.items():
        median = statistics.median(samples)
        print(
            f"  {name:<60} {median:6.3f} s  (min {min(samples):.3f}, "
            f"{median / floor:5.1f}x python start-up)"
        )
    if args.peer:
        ours = statistics.median(times["driftgate --help"])
        theirs = statistics.median(times[f"peer: {args.peer} --help"])
        print(f"  peer / this checkout: {theirs / ours:.1f}x")

    print(f"\nslowest imports of `driftgate --help` (python -X importtime, top {args.top}):")
    for cumulative, name in importtime([str(BIN / "driftgate"), "--help"], args.top):
        print(f"  {cumulative / 1e6:7.3f} s  {name}")


if __name__ == "__main__":
    main()
