"""The label store on SQLite and PostgreSQL: lookups beside the samples, writes that
tell a race from a new label, corrections, windows, and retention that follows the
samples."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from driftgate.stores.labels import LabelRow, LabelStore
from driftgate.stores.samples import Sample, SqlSampleStore

T0 = datetime(2031, 3, 1, tzinfo=UTC)


def _samples(url: str, count: int = 4) -> None:
    store = SqlSampleStore(url)
    try:
        store.append(
            [
                Sample(
                    T0 + timedelta(days=d),
                    f"r{d}",
                    i,
                    "m",
                    "1",
                    {"a": 1.0},
                    0.2 + 0.1 * i,
                    int(i % 2),
                )
                for d in range(count)
                for i in range(2)
            ]
        )
    finally:
        store.close()


def _row(store: LabelStore, request_id: str, index: int, text: str) -> LabelRow:
    sample = store.samples_of([(request_id, index)])[(request_id, index)]
    return LabelRow(request_id, index, sample, text, float(text))


def test_samples_of_finds_only_stored_records(store_url):
    _samples(store_url)
    labels = LabelStore(store_url)
    try:
        found = labels.samples_of([("r0", 0), ("r0", 1), ("r0", 5), ("nope", 0)])
        assert set(found) == {("r0", 0), ("r0", 1)}
        assert found[("r0", 1)].model_version == "1"
        assert found[("r0", 1)].ts_us == int(T0.timestamp() * 1e6)
    finally:
        labels.close()


def test_write_is_durable_and_a_second_insert_of_a_key_is_a_race(store_url):
    _samples(store_url)
    labels = LabelStore(store_url)
    try:
        inserted, raced = labels.write([_row(labels, "r1", 0, "1")], now_us=1)
        assert (inserted, raced) == ([("r1", 0)], [])
        inserted, raced = labels.write([_row(labels, "r1", 0, "0")], now_us=2)
        assert (inserted, raced) == ([], [("r1", 0)])
        assert labels.labels_of([("r1", 0)]) == {("r1", 0): "1"}  # the first stays
        labels.write([], replace=[_row(labels, "r1", 0, "0")], now_us=3)
        assert labels.labels_of([("r1", 0)]) == {("r1", 0): "0"}
    finally:
        labels.close()
    reopened = LabelStore(store_url)  # another process, later
    try:
        assert reopened.labels_of([("r1", 0), ("r1", 1)]) == {("r1", 0): "0"}
    finally:
        reopened.close()


def test_a_window_joins_labels_to_their_outputs(store_url):
    _samples(store_url)
    labels = LabelStore(store_url)
    try:
        labels.write([_row(labels, f"r{d}", i, str(i)) for d in range(3) for i in range(2)],
                     now_us=1)  # fmt: skip
        window = labels.labelled_window(T0 + timedelta(days=1), T0 + timedelta(days=3))
        assert list(window.request_id) == ["r1", "r1", "r2", "r2"]
        assert list(window.value) == [0.0, 1.0, 0.0, 1.0]
        assert list(window.prediction.round(3)) == [0.2, 0.3, 0.2, 0.3]
        assert labels.count(T0, T0 + timedelta(days=10)) == 6
        assert labels.count(T0, T0 + timedelta(days=10), model_version="2") == 0
    finally:
        labels.close()


def test_retention_removes_labels_whose_sample_went(store_url):
    _samples(store_url)
    labels = LabelStore(store_url)
    try:
        labels.write([_row(labels, f"r{d}", i, "1") for d in range(4) for i in (0, 1)], now_us=1)
        cutoff = T0 + timedelta(days=2)
        samples = SqlSampleStore(store_url)
        try:
            # Day 0 is protected (an open review's evidence, say): its sample stays.
            samples.purge(cutoff, protected=[(T0, T0 + timedelta(hours=1))])
        finally:
            samples.close()
        # r1's two labels, one a transaction; r0 keeps its samples and labels.
        assert labels.purge(cutoff, batch_rows=1) == 2
        remaining = labels.labels_of([(f"r{d}", i) for d in range(4) for i in (0, 1)])
        assert set(remaining) == {(f"r{d}", i) for d in (0, 2, 3) for i in (0, 1)}
        assert labels.purge(cutoff) == 0
    finally:
        labels.close()
