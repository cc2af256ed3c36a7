"""Benchmark: a drift check read from the sample store vs the engine alone, and ingest.

Not a test. ``python benchmarks/sample_store_bench.py`` (a 1M-sample window of 8
numeric features on SQLite and on PostgreSQL; ``--rows 1000000,10000000`` adds the 10M
window, which takes a while to load). Same run, same machine, same rows:

* ``engine``: the window already in memory as one DataFrame (read before timing),
  ``monitors.check_drift`` over the drift check's evidence statistics;
* ``streamed``: ``SqlSampleStore.iter_window`` (features only, chunks of
  ``--chunk-rows``) folded chunk by chunk into ``monitors.window.summarise_window``,
  then ``check_drift_counts`` with the same statistics;
* ``drift check``: the drift check's own streamed path on the same window, the chunks
  of ``jobs.window_types.WindowSamples.chunks`` (the profiled features, the lease
  renewed) through ``monitors.partitions.summarise_stream`` in this process, then
  ``check_drift_counts``.

Each contender runs in a fresh child process so that its peak RSS (``VmHWM``, reset
after start-up and fitting the profile) is its own; "one chunk" is the decoded chunk
frame's deep size. The statistics of both are compared (they must agree).

Ingest: samples per second through the service's ``GroupCommitWriter`` into a fresh
PostgreSQL store, ``--writers`` threads each submitting one-record requests (as the
service's handlers do), for ``--ingest-seconds``; columnar layout vs the JSON layout of
earlier stores, in the same run.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

TESTS = ["ks", "kl", "psi", "js", "wasserstein", "missing_share", "mean_shift"]
T0 = datetime(2026, 1, 1, tzinfo=UTC)
POSTGRES_ADMIN_URL = os.environ.get(
    "DRIFTGATE_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/test"
)


def reset_peak() -> None:
    with open("/proc/self/clear_refs", "w") as handle:
        handle.write("5")


def rss(field: str = "VmHWM") -> int:
    with open("/proc/self/status") as handle:
        for line in handle:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise RuntimeError(f"no {field}")


def features(count: int) -> list[str]:
    return [f"f{i}" for i in range(count)]


def profile_of(n_features: int):
    import numpy as np
    import pandas as pd

    from driftgate.monitors.profile import ReferenceProfile

    rng = np.random.default_rng(0)
    reference = pd.DataFrame(rng.normal(size=(100_000, n_features)), columns=features(n_features))
    return ReferenceProfile.fit(reference)


def profile_bytes(profile) -> int:
    """The profile's arrays (breakpoints, bins, cumulative counts), deep."""
    import numpy as np

    total = 0
    for feature in profile.features.values():
        for value in vars(feature).values():
            if isinstance(value, np.ndarray):
                total += value.nbytes
    return total


def populate(url: str, rows: int, n_features: int, batch: int = 20_000) -> float:
    """``rows`` samples over 10 days of event time; returns seconds taken."""
    import numpy as np

    from driftgate.stores.samples import Sample, SqlSampleStore

    store = SqlSampleStore(url, sqlite_synchronous="NORMAL")
    rng = np.random.default_rng(1)
    names = features(n_features)
    step = timedelta(days=10) / rows
    started = time.perf_counter()
    for first in range(0, rows, batch):
        count = min(batch, rows - first)
        values = rng.normal(0.1, 1.0, size=(count, n_features)).tolist()
        store.append(
            [
                Sample(
                    timestamp=T0 + step * (first + i),
                    request_id=f"r{first + i}",
                    record_index=0,
                    model_name="m",
                    model_version="1",
                    features=dict(zip(names, values[i], strict=True)),
                    prediction=0.5,
                    predicted_class=1,
                )
                for i in range(count)
            ]
        )
    store.close()
    return time.perf_counter() - started


def measured(chunks, sizes: list[int]):
    """The chunks as given, the largest one's deep size kept in ``sizes[0]``."""
    for chunk in chunks:
        sizes[0] = max(sizes[0], int(chunk.memory_usage(deep=True).sum()))
        yield chunk
        # As the drift check's own stream does: holding the chunk here while the store
        # builds the next would count two chunks against the bound.
        del chunk


def child(mode: str, url: str, n_features: int, chunk_rows: int) -> dict:
    from driftgate.monitors import check_drift, check_drift_counts
    from driftgate.monitors.window import summarise_window
    from driftgate.stores.samples import SqlSampleStore

    profile = profile_of(n_features)
    store = SqlSampleStore(url)
    end = T0 + timedelta(days=11)
    # Warm up on a minute of the window (imports scipy.stats, the driver's binary
    # loaders...), so the peak below is the window's, not the libraries'.
    warm = store.read_window(T0, T0 + timedelta(minutes=1))[features(n_features)]
    check_drift(profile, warm, tests=TESTS)
    check_drift_counts(profile, summarise_window(profile, [warm]), tests=TESTS)
    for _ in store.iter_window(T0, T0 + timedelta(minutes=1), features_only=True):
        pass
    del warm
    if mode == "engine":
        frame = store.read_window(T0, end)[features(n_features)]
        reset_peak()
        base = rss("VmRSS")
        started = time.perf_counter()
        report = check_drift(profile, frame, tests=TESTS)
        seconds = time.perf_counter() - started
        rows = len(frame)
        chunk_bytes = int(frame.memory_usage(deep=True).sum())
    elif mode == "drift-check":
        from driftgate.jobs.window_types import WindowSamples
        from driftgate.monitors.partitions import summarise_stream

        def window(until: datetime) -> WindowSamples:
            return WindowSamples(
                model_name="m", model_version="1", start=T0, end=until, profile=profile,
                samples=None, current=None, store_url=url, stream=True, chunk_rows=chunk_rows,
            )  # fmt: skip

        summarise_stream(profile, window(T0 + timedelta(minutes=1)).chunks())  # warm-up
        reset_peak()
        base = rss("VmRSS")
        sizes = [0]
        started = time.perf_counter()
        counts = summarise_stream(profile, measured(window(end).chunks(), sizes))
        report = check_drift_counts(profile, counts, tests=TESTS)
        seconds = time.perf_counter() - started
        rows = counts.rows
        chunk_bytes = sizes[0]
    else:
        reset_peak()
        base = rss("VmRSS")
        sizes = [0]
        started = time.perf_counter()
        chunks = store.iter_window(T0, end, chunk_rows=chunk_rows, features_only=True)
        window = summarise_window(profile, measured(chunks, sizes))
        report = check_drift_counts(profile, window, tests=TESTS)
        seconds = time.perf_counter() - started
        rows = window.rows
        chunk_bytes = sizes[0]
    return {
        "mode": mode,
        "rows": rows,
        "seconds": seconds,
        "peak_mib": (rss() - base) / 2**20,
        "chunk_mib": chunk_bytes / 2**20,
        "profile_mib": profile_bytes(profile) / 2**20,
        "metrics": report.metrics(),
    }


def run_child(mode: str, url: str, n_features: int, chunk_rows: int) -> dict:
    out = subprocess.run(
        [sys.executable, __file__, "--child", mode, "--url", url,
         "--features", str(n_features), "--chunk-rows", str(chunk_rows)],
        check=True, capture_output=True, text=True,
    )  # fmt: skip
    return json.loads(out.stdout.strip().splitlines()[-1])


def postgres_database() -> tuple[str, object]:
    import psycopg

    admin = psycopg.connect(POSTGRES_ADMIN_URL, autocommit=True, connect_timeout=3)
    name = f"driftgate_bench_{uuid.uuid4().hex[:10]}"
    admin.execute(f'CREATE DATABASE "{name}"')
    base, _, _ = POSTGRES_ADMIN_URL.rpartition("/")

    def drop() -> None:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.close()

    return f"{base}/{name}", drop


def ingest(url: str, layout: str, seconds: float, writers: int) -> float:
    """Samples/s committed through GroupCommitWriter into a fresh store of ``layout``."""
    from sqlalchemy import create_engine

    from driftgate.serving.writer import GroupCommitWriter
    from driftgate.stores._sql import normalise_url
    from driftgate.stores.samples import Sample, SqlSampleStore, samples_table

    if layout == "json":  # a store created before the columnar layout
        engine = create_engine(normalise_url(url))
        samples_table.metadata.create_all(engine)
        engine.dispose()
    store = SqlSampleStore(url)
    assert store.layout == layout, store.layout
    writer = GroupCommitWriter(lambda b: store.append(b, refuse_known_request_ids=True))
    writer.start()
    names = features(8)
    stop = time.monotonic() + seconds
    done = [0] * writers

    def client(index: int) -> None:
        n = 0
        while time.monotonic() < stop:
            sample = Sample(
                timestamp=datetime.now(UTC),
                request_id=f"w{index}-{n}",
                record_index=0,
                model_name="m",
                model_version="1",
                features={name: 0.5 + n * 1e-6 for name in names},
                prediction=0.5,
                predicted_class=1,
            )
            writer.submit([sample]).result(timeout=30)
            n += 1
        done[index] = n

    threads = [threading.Thread(target=client, args=(i,)) for i in range(writers)]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - started
    writer.close()
    stored = store.count()
    store.close()
    assert stored == sum(done), (stored, sum(done))
    return sum(done) / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", default="1000000", help="window sizes, comma-separated")
    parser.add_argument("--features", type=int, default=8)
    parser.add_argument("--chunk-rows", type=int, default=100_000)
    parser.add_argument("--backends", default="sqlite,postgresql")
    parser.add_argument("--ingest-seconds", type=float, default=10.0)
    parser.add_argument("--writers", type=int, default=16)
    parser.add_argument("--child")
    parser.add_argument("--url")
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.url, args.features, args.chunk_rows)))
        return
    print(f"load average at start: {os.getloadavg()}")
    for backend in args.backends.split(","):
        for rows in [int(r) for r in args.rows.split(",")]:
            folder = tempfile.mkdtemp(prefix="sample-bench-")
            drop = None
            if backend == "sqlite":
                url = f"sqlite:///{Path(folder) / 'samples.db'}"
            else:
                url, drop = postgres_database()
            try:
                loaded = populate(url, rows, args.features)
                engine = run_child("engine", url, args.features, args.chunk_rows)
                streamed = run_child("streamed", url, args.features, args.chunk_rows)
                checked = run_child("drift-check", url, args.features, args.chunk_rows)
                agree = all(
                    abs(engine["metrics"][k] - v) <= 1e-9 * max(1.0, abs(v))
                    or (v != v and engine["metrics"][k] != engine["metrics"][k])
                    for other in (streamed, checked)
                    for k, v in other["metrics"].items()
                )
                ratio = streamed["seconds"] / engine["seconds"]
                bound = 2 * streamed["chunk_mib"] + streamed["profile_mib"]
                print(
                    f"{backend:10s} {rows:>10,d} rows (loaded in {loaded:.0f} s): "
                    f"engine {engine['seconds']:.2f} s, streamed read+check "
                    f"{streamed['seconds']:.2f} s = {ratio:.2f}x; peak +{streamed['peak_mib']:.1f} "
                    f"MiB streamed (2 x one chunk {streamed['chunk_mib']:.1f} MiB + profile "
                    f"{streamed['profile_mib']:.1f} MiB = {bound:.1f} MiB) vs "
                    f"+{engine['peak_mib']:.0f} MiB engine on a {engine['chunk_mib']:.0f} MiB "
                    f"frame; drift check's own stream {checked['seconds']:.2f} s = "
                    f"{checked['seconds'] / engine['seconds']:.2f}x, peak "
                    f"+{checked['peak_mib']:.1f} MiB (chunks {checked['chunk_mib']:.1f} MiB); "
                    f"statistics agree: {agree}; load {os.getloadavg()[0]:.1f}",
                    flush=True,
                )
            finally:
                if drop:
                    drop()
    if "postgresql" in args.backends.split(",") and args.ingest_seconds > 0:
        for layout in ("columnar", "json"):
            url, drop = postgres_database()
            try:
                rate = ingest(url, layout, args.ingest_seconds, args.writers)
            finally:
                drop()
            print(
                f"ingest postgresql {layout:8s}: {rate:,.0f} samples/s "
                f"({args.writers} writers, one record per request)",
                flush=True,
            )
    print(f"load average at end: {os.getloadavg()}")


if __name__ == "__main__":
    main()
