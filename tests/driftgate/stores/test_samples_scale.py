"""The sample path at scale, on SQLite and real PostgreSQL: streamed chunks, the
columnar layout beside stores of the JSON layout, sampling fractions, retention."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

import numpy as np
import pandas as pd
import pytest
from sqlalchemy import create_engine

from driftgate.stores import Sample, SqlSampleStore
from driftgate.stores._sql import normalise_url
from driftgate.stores.samples import (
    LAYOUT_COLUMNAR,
    LAYOUT_JSON,
    META_COLUMNS,
    OUTPUT_COLUMNS,
    samples_table,
)

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
DAY = timedelta(days=1)


def sample(at: datetime, request_id: str, fraction: float = 1.0, **features) -> Sample:
    return Sample(
        timestamp=at,
        request_id=request_id,
        record_index=0,
        model_name="m",
        model_version="1",
        features=features or {"a": 1.0},
        prediction=0.5,
        predicted_class=1,
        sample_fraction=fraction,
    )


def minutes(count: int, start: datetime = T0, **features) -> list[Sample]:
    return [
        sample(start + timedelta(minutes=i), f"r{start:%d}-{i}", a=float(i), b=-float(i))
        for i in range(count)
    ]


def legacy_store(url: str) -> SqlSampleStore:
    """A store created before the columnar layout (its table made by the old schema)."""
    engine = create_engine(normalise_url(url))
    samples_table.metadata.create_all(engine)
    engine.dispose()
    return SqlSampleStore(url)


def test_chunks_stream_the_window_in_bounded_frames_equal_to_read_window(store_url):
    store = SqlSampleStore(store_url)
    store.append(minutes(250))
    whole = store.read_window(T0, T0 + DAY)
    chunks = list(store.iter_window(T0, T0 + DAY, chunk_rows=100))
    assert [len(c) for c in chunks] == [100, 100, 50]
    pd.testing.assert_frame_equal(pd.concat(chunks, ignore_index=True), whole)
    features = list(store.iter_window(T0, T0 + DAY, chunk_rows=64, features_only=True))
    assert list(features[0].columns) == ["a", "b"]
    assert pd.concat(features, ignore_index=True)["a"].tolist() == [float(i) for i in range(250)]
    # A chunk's features share one float64 block (values copied once, no consolidation).
    assert features[0]._mgr.nblocks == 1


def test_new_stores_are_columnar_and_postgres_is_partitioned_by_day(store_url):
    store = SqlSampleStore(store_url)
    assert store.layout == LAYOUT_COLUMNAR
    assert store.partitioned == store_url.startswith("postgresql")
    store.append([sample(T0, "a"), sample(T0 + 3 * DAY, "b")])
    if store.partitioned:
        with store.engine.connect() as connection:
            names = [name for name, _, _ in store._partition_bounds(connection)]
        assert names == ["driftgate_samples_p20260301", "driftgate_samples_p20260304"]


def test_categorical_strings_come_back_as_strings_and_schemas_mix(store_url):
    store = SqlSampleStore(store_url)
    store.append(
        [
            sample(T0, "s1", a=1.5, city="Omaha", flag=True),
            sample(T0 + timedelta(minutes=1), "s2", a=None, city=None),  # None: a number
            sample(T0 + timedelta(minutes=2), "s3", a=2.5, city="Lincoln"),
            sample(T0 + timedelta(minutes=3), "s4", c=math.inf),  # another schema
        ]
    )
    window = store.read_window(T0, T0 + DAY)
    assert window["city"].tolist()[0] == "Omaha" and window["city"].tolist()[2] == "Lincoln"
    assert pd.isna(window["city"].iloc[1]) and pd.isna(window["city"].iloc[3])
    assert window["flag"].iloc[0] is True
    assert window["a"].tolist()[0] == 1.5 and math.isnan(window["a"].iloc[1])
    assert math.isnan(window["c"].iloc[3])  # non-finite stored as null
    features = window.columns[len(META_COLUMNS) : -len(OUTPUT_COLUMNS)]
    assert list(features) == ["a", "city", "flag", "c"]
    # Chunk by chunk, each chunk has the union of its own rows' fields.
    chunks = list(store.iter_window(T0, T0 + DAY, chunk_rows=2, features_only=True))
    assert [list(c.columns) for c in chunks] == [["a", "city", "flag"], ["a", "city", "c"]]


def test_a_chunk_whose_schema_changes_between_fetches_equals_read_window(store_url, monkeypatch):
    # Fetches of one numeric schema are decoded straight into the chunk's matrix; a
    # fetch of another schema (or with a category) mid-chunk hands the rows already
    # there to the general path. Small fetches put every switch inside one chunk.
    from driftgate.stores import samples

    monkeypatch.setattr(samples, "FETCH_ROWS", 3)
    store = SqlSampleStore(store_url)
    at = [T0 + timedelta(minutes=i) for i in range(16)]
    store.append(
        [sample(at[i], f"x{i}", a=float(i), b=-float(i)) for i in range(7)]
        + [sample(at[i], f"x{i}", b=float(i), c=2.0 * i) for i in range(7, 12)]
        + [sample(at[i], f"x{i}", a=float(i), city=f"c{i}") for i in range(12, 16)]
    )
    whole = store.read_window(T0, T0 + DAY)
    features = list(whole.columns[len(META_COLUMNS) : -len(OUTPUT_COLUMNS)])
    (chunk,) = store.iter_window(T0, T0 + DAY, chunk_rows=100, features_only=True)
    pd.testing.assert_frame_equal(chunk[features], whole[features])
    # One schema throughout: every chunk straight from the matrix, the last one short.
    first = list(store.iter_window(T0, at[7], chunk_rows=4, features_only=True))
    assert [len(c) for c in first] == [4, 3]
    assert pd.concat(first, ignore_index=True)["b"].tolist() == [-float(i) for i in range(7)]


def test_a_store_of_the_json_layout_still_opens_reads_and_writes(store_url):
    store = legacy_store(store_url)
    assert store.layout == LAYOUT_JSON and not store.partitioned
    store.append([*minutes(30), sample(T0 + timedelta(hours=2), "cat", a=3, city="Omaha")])
    window = store.read_window(T0, T0 + DAY)
    assert len(window) == 31 and window["city"].iloc[-1] == "Omaha"
    chunks = list(store.iter_window(T0, T0 + DAY, chunk_rows=10, features_only=True))
    assert [len(c) for c in chunks] == [10, 10, 10, 1]
    assert store.window_stats(T0, T0 + DAY).estimated_records == 31
    # Reopened, it is still the JSON layout: nothing was migrated behind its back.
    assert SqlSampleStore(store_url).layout == LAYOUT_JSON


def test_every_keeps_an_even_sample(store_url):
    store = SqlSampleStore(store_url)
    store.append(minutes(100))
    kept = store.read_window(T0, T0 + DAY, every=10)
    assert 9 <= len(kept) <= 11
    assert kept["a"].max() - kept["a"].min() >= 80  # spread over the window


def test_sampling_is_deterministic_and_recorded_with_the_window(store_url, tmp_path):
    ids = [f"req-{i}" for i in range(20_000)]
    store = SqlSampleStore(store_url)
    tenth = store.sampling(0.1)
    kept = [i for i in ids if tenth.keeps(i)]
    # The same answer every time, and in another process opening the same store.
    again = SqlSampleStore(store_url).sampling(0.1)
    assert kept == [i for i in ids if again.keeps(i)]
    assert 0.09 < len(kept) / len(ids) < 0.11
    assert all(store.sampling(1.0).keeps(i) for i in ids[:100])
    twentieth = store.sampling(0.05)
    assert set(i for i in ids if twentieth.keeps(i)) <= set(kept)  # nested fractions
    # The decision is keyed by the store's own secret: another store decides otherwise
    # (a client cannot compute it), and the key is not shown.
    other = SqlSampleStore(f"sqlite:///{tmp_path / 'other.db'}").sampling(0.1)
    assert [i for i in ids if other.keeps(i)] != kept
    assert store._sampling_key.hex() not in repr(tenth) + repr(store)
    store.append([sample(T0, "x", 0.1), sample(T0 + timedelta(minutes=1), "y", 0.5)])
    stats = store.window_stats(T0, T0 + DAY)
    assert (stats.rows, stats.estimated_records) == (2, pytest.approx(12.0))
    assert (stats.min_fraction, stats.max_fraction) == (0.1, 0.5)
    assert store.window_stats(T0 + DAY, T0 + 2 * DAY).rows == 0


def test_retention_removes_old_samples_and_keeps_protected_windows(store_url):
    store = SqlSampleStore(store_url)
    for day in range(6):  # six days, ten samples each
        store.append(minutes(10, T0 + day * DAY))
    evidence = (T0 + DAY, T0 + DAY + timedelta(hours=1))  # an open review's window
    result = store.purge(T0 + 4 * DAY, protected=[evidence], batch_rows=7)
    left = store.read_window(T0 - DAY, T0 + 10 * DAY)
    days = sorted({stamp.day for stamp in left["timestamp"]})
    if store.partitioned:  # whole days: the partition of 1 March goes, 2 March stays whole
        assert result.dropped_partitions == [
            "driftgate_samples_p20260301",
            "driftgate_samples_p20260303",
            "driftgate_samples_p20260304",
        ]
        assert result.kept_partitions == ["driftgate_samples_p20260302"]
        assert days == [2, 5, 6]
    else:  # rows: everything older than the cutoff outside the evidence window
        assert result.deleted_rows == 30
        assert days == [2, 5, 6]
    assert len(left) == 30
    # Nothing left to do: a second pass removes nothing.
    again = store.purge(T0 + 4 * DAY, protected=[evidence])
    assert again.deleted_rows == 0 and again.dropped_partitions == []


def test_a_window_being_read_is_never_cut(store_url):
    store = SqlSampleStore(store_url)
    for day in range(3):
        store.append(minutes(50, T0 + day * DAY))
    reader = SqlSampleStore(store_url)
    lease = reader.lease(T0, T0 + DAY)
    chunks = reader.iter_window(T0, T0 + DAY, chunk_rows=10)
    first = next(chunks)  # the read has begun
    result = store.purge(T0 + 3 * DAY)
    rest = list(chunks)
    assert len(first) + sum(len(c) for c in rest) == 50  # the whole window was read
    assert len(reader.read_window(T0, T0 + DAY)) == 50  # and is still there
    if store.partitioned:  # a partition drop waits for no reader: busy ones go later
        # The lease [1 March 12:00, 2 March 12:00) keeps both of its days whole.
        assert result.kept_partitions == [
            "driftgate_samples_p20260301",
            "driftgate_samples_p20260302",
        ]
        assert result.dropped_partitions + result.busy_partitions == ["driftgate_samples_p20260303"]
        assert store.purge(T0 + 3 * DAY).dropped_partitions == result.busy_partitions
    else:
        assert result.deleted_rows == 100
    assert len(store.read_window(T0 + 2 * DAY, T0 + 3 * DAY)) == 0  # the rest went
    reader.release(lease)
    store.purge(T0 + 3 * DAY)
    assert store.count() == 0  # released: the next pass removes it


def test_an_expired_lease_no_longer_protects(store_url):
    store = SqlSampleStore(store_url)
    store.append(minutes(5))
    store.lease(T0, T0 + DAY, seconds=-1)  # a reader that died long ago
    store.purge(T0 + 2 * DAY)
    assert store.count() == 0


def test_a_lease_taken_by_another_process_is_seen_by_the_purge(store_url):
    store = SqlSampleStore(store_url)
    for day in range(2):
        store.append(minutes(20, T0 + day * DAY))
    other = SqlSampleStore(store_url)  # the drift check's own store object
    other.lease(T0, T0 + timedelta(hours=1))
    store.purge(T0 + 5 * DAY)
    assert len(store.read_window(T0, T0 + DAY)) == 20
    assert len(store.read_window(T0 + DAY, T0 + 2 * DAY)) == 0


def test_a_day_dropped_by_another_processs_retention_takes_samples_again(store_url):
    """The service remembers the daily partitions it created; a retention pass in the
    drift-check's process drops one; a late sample of that day is still stored."""
    service = SqlSampleStore(store_url)
    service.append(minutes(5))
    SqlSampleStore(store_url).purge(T0 + 2 * DAY)  # another process, another object
    assert service.count() == 0
    late = [sample(T0 + timedelta(hours=2), "late", a=7.0)]
    assert service.append(late) == 1
    window = service.read_window(T0, T0 + DAY)
    assert window["request_id"].tolist() == ["late"] and window["a"].tolist() == [7.0]


def test_many_feature_lists_share_one_schema_table(store_url):
    store = SqlSampleStore(store_url)
    rng = np.random.default_rng(0)
    batch = [
        sample(
            T0 + timedelta(seconds=i),
            f"v{i}",
            **{f"f{j}": float(rng.normal()) for j in range(i % 3 + 1)},
        )
        for i in range(30)
    ]
    store.append(batch)
    other = SqlSampleStore(store_url)  # another process's view: schemas read from the store
    window = other.read_window(T0, T0 + DAY)
    assert list(window.columns[len(META_COLUMNS) : -len(OUTPUT_COLUMNS)]) == ["f0", "f1", "f2"]
    assert window["f2"].notna().sum() == 10
    assert window["f0"].tolist() == [s.features["f0"] for s in batch]
