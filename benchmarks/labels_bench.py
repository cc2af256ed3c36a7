"""Label ingestion: labels per second through the one judging path (``submit_labels``:
lookup of the samples, type check, conflict check, one transaction per batch), next to
the sample store's own append of the same number of records, in the same run.

Run: .venv/bin/python benchmarks/labels_bench.py [--records 20000] [--batch 100]
     [--url postgresql://postgres@127.0.0.1:5432/DB]   (default: a SQLite file, FULL)
"""

from __future__ import annotations

import argparse
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from driftgate.jobs.feedback import LabelInput, submit_labels
from driftgate.stores.labels import LabelStore
from driftgate.stores.samples import Sample, SqlSampleStore


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--records", type=int, default=20_000)
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--url", default=None)
    args = parser.parse_args(argv)
    folder = Path(tempfile.mkdtemp(prefix="labels-bench-"))
    url = args.url or f"sqlite:///{folder / 'samples.db'}"
    start = datetime(2035, 1, 1, tzinfo=UTC)
    per_request = 10
    samples = [
        Sample(start + timedelta(seconds=r), f"req-{r}", i, "m", "1", {"a": 1.0, "b": 2.0}, 0.5, 1)
        for r in range(args.records // per_request)
        for i in range(per_request)
    ]
    store = SqlSampleStore(url)
    began = time.perf_counter()
    for i in range(0, len(samples), args.batch):
        store.append(samples[i : i + args.batch])
    append_seconds = time.perf_counter() - began
    store.close()
    labels = LabelStore(url)
    items = [LabelInput(k, s.request_id, s.record_index, k % 2) for k, s in enumerate(samples)]
    began = time.perf_counter()
    for i in range(0, len(items), args.batch):
        outcome = submit_labels(
            labels, items[i : i + args.batch], outputs_of=lambda n, v: ("binary", ()),
            horizon=None, source="labels-bench",
        )  # fmt: skip
        assert outcome.counts()["accepted"] == len(items[i : i + args.batch])
    label_seconds = time.perf_counter() - began
    began = time.perf_counter()
    for i in range(0, len(items), args.batch):  # the same labels again: all duplicates
        submit_labels(labels, items[i : i + args.batch], outputs_of=lambda n, v: ("binary", ()),
                      horizon=None, source="labels-bench")  # fmt: skip
    duplicate_seconds = time.perf_counter() - began
    labels.close()
    n = len(samples)
    print(f"{n} records in batches of {args.batch} on {url.split(':', 1)[0]}")
    print(f"sample append:  {n / append_seconds:9.0f} records/s (the peer)")
    print(f"labels, new:    {n / label_seconds:9.0f} labels/s "
          f"({append_seconds / label_seconds:.2f}x the append rate)")  # fmt: skip
    print(f"labels, again:  {n / duplicate_seconds:9.0f} labels/s (all duplicates)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
