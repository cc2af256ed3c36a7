"""Benchmark: the drift check on Parquet partitions, in process vs on a local Dask cluster.

Not a test. ``python benchmarks/scaleout_bench.py`` (full size: 10M rows x 25 columns
— 20 numeric, 5 categorical — in 20 Parquet partitions of 500k rows) or
``--rows 1000000`` for a quick run. The window is the shifted data of
``drift_bench.make_frame``; the profile is fitted on 1M unshifted rows beforehand.

Contenders, each on the same cells (partition x feature group) of the same files:

* ``in-process``: :func:`monitors.partitions.summarise_parts` with the default mapper,
  one cell after another in this process;
* ``prefect-dask``: the drift-check flow's mapper (``flows.drift_check.dask_mapper``):
  one ``summarise-cell`` Prefect task per cell on Prefect's Dask task runner, against a
  ``distributed.LocalCluster`` of N single-threaded worker processes;
* ``dask``: the peer without Prefect — ``distributed.Client.map`` of the same function
  on the same cluster — to show what Prefect's task bookkeeping costs.

Wall time covers summarising and judging (``check_drift_counts`` with every
statistic); the cluster and Prefect's temporary API server are started (and warmed on
one cell) before timing. Memory: the driver's peak RSS (``VmHWM`` after resetting it
via ``/proc/self/clear_refs``), and for Dask the sum of every worker's peak, measured
the same way inside each worker. The statistics of all three are compared: they must
be equal bit for bit.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))
sys.path.insert(0, str(REPO_ROOT / "benchmarks"))

from drift_bench import make_frame  # noqa: E402

TESTS = ["ks", "kl", "psi", "js", "wasserstein", "chi2", "missing_share", "mean_shift"]


def reset_peak() -> None:
    """Reset this process's peak RSS (VmHWM) to its current RSS."""
    with open("/proc/self/clear_refs", "w") as handle:
        handle.write("5")


def peak_bytes() -> int:
    with open("/proc/self/status") as handle:
        for line in handle:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmHWM in /proc/self/status")


def write_partitions(folder: Path, rows: int, partition_rows: int) -> list[str]:
    paths = []
    for index, start in enumerate(range(0, rows, partition_rows)):
        size = min(partition_rows, rows - start)
        frame = make_frame(size, shifted=True, seed=1000 + index)
        path = folder / f"window-{index:04d}.parquet"
        frame.to_parquet(path, row_group_size=100_000)
        paths.append(str(path))
        print(f"  wrote {path.name}: {size:,} rows", file=sys.stderr, flush=True)
    return paths


def timed(label: str, run) -> tuple[float, int, object]:
    import gc

    gc.collect()
    reset_peak()
    start = time.perf_counter()
    result = run()
    seconds = time.perf_counter() - start
    return seconds, peak_bytes(), result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--partition-rows", type=int, default=500_000)
    parser.add_argument("--reference-rows", type=int, default=1_000_000)
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--groups", type=int, default=1, help="feature groups per partition")
    args = parser.parse_args()

    from distributed import Client, LocalCluster

    from driftgate.flows.drift_check import dask_mapper
    from driftgate.monitors import check_drift_counts
    from driftgate.monitors.partitions import feature_groups, summarise_part, summarise_parts
    from driftgate.monitors.profile import ReferenceProfile
    from driftgate.monitors.window import merge_windows

    with tempfile.TemporaryDirectory(prefix="scaleout-bench-") as scratch:
        folder = Path(scratch)
        print(f"writing {args.rows:,} rows x 25 columns as Parquet...", file=sys.stderr)
        paths = write_partitions(folder, args.rows, args.partition_rows)
        size = sum(Path(p).stat().st_size for p in paths)
        profile = ReferenceProfile.fit(
            make_frame(args.reference_rows, shifted=False, seed=1), sample_rows=0
        )
        groups = feature_groups(list(profile.features), args.groups)
        cells = len(paths) * len(groups)

        def judge(window):
            return check_drift_counts(profile, window, TESTS)

        figures = {}
        seconds, peak, report = timed(
            "in-process", lambda: judge(summarise_parts(profile, paths, groups))
        )
        figures["in-process"] = (seconds, peak, 0, report.to_dict())

        with (
            LocalCluster(n_workers=args.workers, threads_per_worker=1, processes=True) as cluster,
            Client(cluster) as client,
        ):
            mapper = dask_mapper(cluster.scheduler_address)
            # Prefect's API up, and every worker has imported Prefect and driftgate.
            summarise_parts(profile, paths[: args.workers], groups[:1], mapper=mapper)
            shared = client.scatter(profile, broadcast=True)

            def raw_dask(client, shared):
                """Every cell submitted at once, then gathered slice by slice in order."""
                slices = [
                    client.map(
                        summarise_part,
                        [shared] * len(groups),
                        [path] * len(groups),
                        groups,
                        pure=False,
                    )
                    for path in paths
                ]
                return [client.gather(futures) for futures in slices]

            def worker_peaks() -> int:
                return sum(client.run(peak_bytes).values())

            for name, run in (
                ("prefect-dask", lambda: judge(summarise_parts(profile, paths, groups, mapper))),
                ("dask", lambda: judge(merge_windows(profile, raw_dask(client, shared)))),
            ):
                client.run(reset_peak)
                seconds, peak, report = timed(name, run)
                figures[name] = (seconds, peak, worker_peaks(), report.to_dict())

    base = figures["in-process"]
    print(
        f"\nDrift check, {args.rows:,} rows x 25 columns in {len(paths)} Parquet partitions "
        f"({size / 2**20:,.0f} MiB), {len(groups)} feature group(s): {cells} cells; "
        f"{len(TESTS)} statistics; {args.workers} Dask workers, {os.cpu_count()} cores"
    )
    print(f"{'':>14}  {'wall':>8}  {'driver peak':>12}  {'workers peak':>13}  vs in-process")
    for name, (seconds, peak, workers, _) in figures.items():
        print(
            f"{name:>14}  {seconds:7.1f}s  {peak / 2**20:9.0f} MiB  "
            f"{workers / 2**20:10.0f} MiB  {base[0] / seconds:12.2f}x"
        )
    equal = all(f[3] == base[3] for f in figures.values())
    print(f"statistics equal bit for bit across contenders: {equal}")
    if not equal:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
