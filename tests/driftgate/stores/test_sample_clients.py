"""The ``client`` column of the sample store (issue 28, item 4), on SQLite and on
PostgreSQL's partitioned table: a fresh store has it; a store made before it gets it
when opened, its old rows reading as one unknown client."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

from sqlalchemy import inspect, text

from driftgate.stores.samples import (
    REJECTED_TABLE,
    SAMPLES_TABLE,
    UNKNOWN_CLIENT,
    Sample,
    SqlSampleStore,
)

T0 = datetime(2026, 12, 1, 12, tzinfo=UTC)


def _samples(prefix: str, client: str | None, count: int, nulls: int, day: int = 0):
    return [
        Sample(
            timestamp=T0 + timedelta(days=day, seconds=i), request_id=f"{prefix}-{i}",
            record_index=0, model_name="m", model_version="1",
            features={"a": math.nan if i < nulls else float(i), "b": 1.0},
            prediction=0.5, predicted_class=1, client=client,
        )
        for i in range(count)
    ]  # fmt: skip


def _columns(store: SqlSampleStore, table: str = SAMPLES_TABLE) -> set[str]:
    return {c["name"] for c in inspect(store.engine).get_columns(table)}


def test_a_fresh_store_keeps_each_samples_client(store_url):
    store = SqlSampleStore(store_url)
    try:
        assert "client" in _columns(store)
        store.append(_samples("x", "00aa11bb22cc33dd", 10, nulls=7))
        store.append(_samples("y", "ffee00112233aabb", 5, nulls=1))
        tallies = store.missing_by_client(T0, T0 + timedelta(hours=1), ["a", "b", "absent"])
        assert {c: (t.rows, t.missing) for c, t in tallies.items()} == {
            "00aa11bb22cc33dd": (10, {"a": 7, "b": 0, "absent": 10}),
            "ffee00112233aabb": (5, {"a": 1, "b": 0, "absent": 5}),
        }
        kept = store.read_window(T0, T0 + timedelta(hours=1))
        assert len(kept) == 15
        rest = list(
            store.iter_window(T0, T0 + timedelta(hours=1), features_only=True,
                              without_client="00aa11bb22cc33dd")
        )  # fmt: skip
        assert sum(len(c) for c in rest) == 5 and int(rest[0]["a"].isna().sum()) == 1
    finally:
        store.close()


def test_a_store_made_before_the_column_gets_it_on_open(store_url):
    """The old schema: the table without ``client`` (dropped here from a fresh one,
    after rows were stored on two days, i.e. two partitions on PostgreSQL)."""
    store = SqlSampleStore(store_url)
    store.append(_samples("old", "00aa11bb22cc33dd", 6, nulls=4))
    store.append(_samples("old2", None, 3, nulls=0, day=1))
    with store.engine.begin() as connection:
        connection.execute(text(f"ALTER TABLE {SAMPLES_TABLE} DROP COLUMN client"))
        connection.execute(text(f"ALTER TABLE {REJECTED_TABLE} DROP COLUMN client"))
    assert "client" not in _columns(store) | _columns(store, REJECTED_TABLE)
    store.close()

    store = SqlSampleStore(store_url)  # opened by this version: the column comes back
    try:
        assert "client" in _columns(store) and "client" in _columns(store, REJECTED_TABLE)
        if store.partitioned:  # the parent's ADD COLUMN reached every partition
            with store.engine.connect() as connection:
                partitions = connection.execute(
                    text("SELECT c.relname FROM pg_inherits i JOIN pg_class c ON "
                         "c.oid = i.inhrelid JOIN pg_class p ON p.oid = i.inhparent "
                         "WHERE p.relname = :t"), {"t": SAMPLES_TABLE},
                ).scalars().all()  # fmt: skip
            assert len(partitions) == 2
            assert all("client" in _columns(store, p) for p in partitions)
        store.append(_samples("new", "ffee00112233aabb", 4, nulls=1))
        window = (T0, T0 + timedelta(days=2))
        tallies = store.missing_by_client(*window, ["a"])
        # The old rows are one unknown client, whatever key they were written with.
        assert {c: (t.rows, t.missing["a"]) for c, t in tallies.items()} == {
            UNKNOWN_CLIENT: (9, 4),
            "ffee00112233aabb": (4, 1),
        }
        without_unknown = store.iter_window(*window, features_only=True,
                                            without_client=UNKNOWN_CLIENT)  # fmt: skip
        assert sum(len(c) for c in without_unknown) == 4
        without_new = store.iter_window(*window, features_only=True,
                                        without_client="ffee00112233aabb")  # fmt: skip
        assert sum(len(c) for c in without_new) == 9  # NULL <> key is not true: kept
    finally:
        store.close()
