"""The sample store on SQLite and real PostgreSQL, and the Parquet/CSV window reader."""

from __future__ import annotations

import math
import threading
from datetime import UTC, datetime, timedelta

import pandas as pd
import pytest

from driftgate.stores import FileSampleSource, Sample, SqlSampleStore, StoreError
from driftgate.stores.samples import open_sample_reader

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def sample(minute: int, request_id: str = "r", index: int = 0, version: str = "1", **features):
    return Sample(
        timestamp=T0 + timedelta(minutes=minute),
        request_id=request_id,
        record_index=index,
        model_name="m",
        model_version=version,
        features=features or {"a": float(minute), "b": -1.0},
        prediction=0.25,
        predicted_class=0,
    )


def test_round_trip_columns_order_and_values(store_url):
    store = SqlSampleStore(store_url)
    store.append([sample(2, "r2"), sample(0, "r0", a=0.5, b=2), sample(1, "r1")])
    window = store.read_window(T0, T0 + timedelta(hours=1))
    assert list(window.columns) == [
        "timestamp", "received_at", "model_name", "model_version", "request_id",
        "record_index", "a", "b", "prediction", "predicted_class", "predicted_label",
    ]  # fmt: skip
    assert list(window.request_id) == ["r0", "r1", "r2"]  # time order, not insert order
    assert window.timestamp.iloc[0] == pd.Timestamp(T0)
    assert str(window.timestamp.dt.tz) == "UTC"
    assert window.loc[0, "a"] == 0.5 and window.loc[0, "b"] == 2
    assert window.prediction.tolist() == [0.25] * 3
    assert store.count() == 3


def test_a_store_made_before_predicted_label_opens_and_gains_the_column(store_url):
    """Multiclass labels are a nullable column added on open: older rows read NULL."""
    from dataclasses import replace

    from sqlalchemy import text

    store = SqlSampleStore(store_url)
    store.append([sample(0, "old")])
    with store.engine.begin() as connection:  # the table as it was before the column
        connection.execute(text("ALTER TABLE driftgate_samples DROP COLUMN predicted_label"))
    store.close()
    reopened = SqlSampleStore(store_url)
    reopened.append([replace(sample(1, "new"), predicted_class=2, predicted_label="barolo")])
    window = reopened.read_window(T0, T0 + timedelta(hours=1))
    assert window.predicted_label.tolist() == [None, "barolo"]
    assert window.predicted_class.tolist() == [0, 2]
    SqlSampleStore(store_url).close()  # opening again adds nothing twice


def test_windows_are_half_open_and_naive_means_utc(store_url):
    store = SqlSampleStore(store_url)
    store.append([sample(m, f"r{m}") for m in range(10)])
    first = store.read_window(T0, T0 + timedelta(minutes=5))
    second = store.read_window(T0 + timedelta(minutes=5), T0 + timedelta(minutes=10))
    assert list(first.request_id) == [f"r{m}" for m in range(5)]
    assert list(second.request_id) == [f"r{m}" for m in range(5, 10)]
    naive = store.read_window(T0.replace(tzinfo=None), "2026-03-01T12:03:00")
    assert len(naive) == 3
    shifted = store.read_window("2026-03-01T13:00:00+01:00", "2026-03-01T13:02:00+01:00")
    assert list(shifted.request_id) == ["r0", "r1"]


def test_versions_with_different_features_give_the_union(store_url):
    store = SqlSampleStore(store_url)
    store.append([sample(0, "old", version="1", a=1.0), sample(1, "new", version="2", c=3.0)])
    window = store.read_window(T0, T0 + timedelta(hours=1))
    assert {"a", "c"} <= set(window.columns)
    assert math.isnan(window.loc[1, "a"]) and window.loc[1, "c"] == 3.0
    only_new = store.read_window(T0, T0 + timedelta(hours=1), model_version="2")
    assert list(only_new.request_id) == ["new"]


def test_empty_window_has_the_columns(store_url):
    window = SqlSampleStore(store_url).read_window(T0, T0 + timedelta(hours=1))
    assert window.empty
    assert {"timestamp", "model_version", "request_id", "prediction"} <= set(window.columns)


def test_a_failing_batch_stores_nothing(store_url):
    store = SqlSampleStore(store_url)
    broken = Sample(T0, "bad", 0, "m", None, {"a": 1.0}, 0.5, 1)  # model_version NOT NULL
    with pytest.raises(Exception, match=r"(?i)null"):
        store.append([sample(0, "good"), broken])
    assert store.count() == 0


def test_a_batch_larger_than_one_statement_is_stored_whole_and_in_one_transaction(
    tmp_path, monkeypatch
):
    """SQLite's samples go in as multi-row INSERTs of at most the parameter limit: a
    batch past it is split across statements, every row stored, none on a failure."""
    from driftgate.stores import samples as module

    monkeypatch.setattr(module, "_SQLITE_MAX_VARIABLES", 40)  # 3 or 4 rows a statement
    store = SqlSampleStore(f"sqlite:///{tmp_path / 'samples.db'}")
    store.append([sample(i, f"r{i}", a=float(i), b=-i) for i in range(25)])
    window = store.read_window(T0, T0 + timedelta(hours=1))
    assert window.request_id.tolist() == [f"r{i}" for i in range(25)]
    assert window.a.tolist() == [float(i) for i in range(25)]
    assert window.b.tolist() == [float(-i) for i in range(25)]
    broken = Sample(T0, "bad", 0, "m", None, {"a": 1.0}, 0.5, 1)  # model_version NOT NULL
    with pytest.raises(Exception, match=r"(?i)null"):
        store.append([*(sample(30 + i, f"s{i}") for i in range(20)), broken])
    assert store.count() == 25


def test_non_finite_features_are_stored_as_null(store_url):
    store = SqlSampleStore(store_url)
    store.append([sample(0, "r", a=math.inf, b=math.nan)])
    window = store.read_window(T0, T0 + timedelta(hours=1))
    assert window.loc[0, ["a", "b"]].isna().all()


def test_concurrent_appends_from_threads(store_url):
    store = SqlSampleStore(store_url)
    errors = []

    def writer(thread: int) -> None:
        try:
            for batch in range(10):
                store.append([sample(0, f"t{thread}-{batch}", i) for i in range(5)])
        except Exception as exc:  # pragma: no cover - the assertion below reports it
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(t,)) for t in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    assert store.count() == 4 * 10 * 5
    assert len(store.request_ids()) == 40


def test_a_second_store_object_sees_committed_rows(store_url):
    SqlSampleStore(store_url).append([sample(0, "durable")])
    assert SqlSampleStore(store_url).request_ids() == {"durable"}


def test_sqlite_runs_in_wal_with_the_chosen_synchronous_mode(tmp_path):
    for mode, code in (("FULL", 2), ("NORMAL", 1)):
        store = SqlSampleStore(f"sqlite:///{tmp_path / mode}.db", sqlite_synchronous=mode)
        with store.engine.connect() as connection:
            assert connection.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
            assert connection.exec_driver_sql("PRAGMA synchronous").scalar() == code


def test_unsupported_urls_are_refused(tmp_path):
    with pytest.raises(StoreError, match="in-memory"):
        SqlSampleStore("sqlite:///:memory:")
    with pytest.raises(StoreError, match="unsupported"):
        SqlSampleStore("mysql://x@y/z")


# -- files -----------------------------------------------------------------------


def frame_of(minutes, column="timestamp", tz=True):
    stamps = [T0 + timedelta(minutes=m) for m in minutes]
    if not tz:
        stamps = [s.replace(tzinfo=None) for s in stamps]
    return pd.DataFrame({column: stamps, "a": [float(m) for m in minutes]})


def test_parquet_and_csv_files_read_the_same_window(tmp_path):
    frame_of([3, 0, 1, 7]).to_parquet(tmp_path / "samples.parquet")
    frame_of([3, 0, 1, 7], tz=False).to_csv(tmp_path / "samples.csv", index=False)
    end = T0 + timedelta(minutes=3)
    for name in ("samples.parquet", "samples.csv"):
        window = FileSampleSource(tmp_path / name).read_window(T0, end)
        assert window.a.tolist() == [0.0, 1.0], name
        assert str(window.timestamp.dt.tz) == "UTC"


def test_a_folder_of_files_and_a_custom_timestamp_column(tmp_path):
    frame_of([5, 6], column="event_time").to_parquet(tmp_path / "2.parquet")
    frame_of([0, 1], column="event_time").to_csv(tmp_path / "1.csv", index=False)
    (tmp_path / "notes.txt").write_text("ignored")
    source = open_sample_reader(str(tmp_path), timestamp_column="event_time")
    window = source.read_window(T0, T0 + timedelta(hours=1))
    assert window.a.tolist() == [0.0, 1.0, 5.0, 6.0]
    assert "event_time" not in window.columns and window.columns[0] == "timestamp"


def test_file_errors_name_the_problem(tmp_path):
    with pytest.raises(StoreError, match="not found"):
        FileSampleSource(tmp_path / "missing.parquet")
    frame_of([0]).drop(columns=["timestamp"]).to_csv(tmp_path / "x.csv", index=False)
    with pytest.raises(StoreError, match="no timestamp column 'timestamp'"):
        FileSampleSource(tmp_path / "x.csv").read_window(T0, T0 + timedelta(hours=1))
    pd.DataFrame({"timestamp": ["not a time"], "a": [1]}).to_csv(tmp_path / "y.csv", index=False)
    with pytest.raises(StoreError, match="unparseable timestamp at row 0"):
        FileSampleSource(tmp_path / "y.csv").read_window(T0, T0 + timedelta(hours=1))
