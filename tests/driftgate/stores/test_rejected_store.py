"""Rejected traffic, overflow counts and the requests log in the sample store
(issue 16), on SQLite and real PostgreSQL."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

import pytest

from driftgate.stores.samples import (
    MAX_RAW_VALUE_CHARS,
    DuplicateRequestIds,
    RejectedOverflow,
    RejectedSample,
    RequestRecord,
    Sample,
    SqlSampleStore,
    clean_rejected_features,
    minute_of,
    raw_text,
)

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
WINDOW = (T0 - timedelta(days=1), T0 + timedelta(days=1))


def accepted(request_id: str, minute: int = 0) -> Sample:
    return Sample(T0 + timedelta(minutes=minute), request_id, 0, "m", "1",
                  {"a": 1.0, "b": 2.0}, 0.5, 1)  # fmt: skip


def refused(request_id: str, minute: int = 0, value=99.0, rule="columns.a.range") -> RejectedSample:
    record = {"a": value, "b": 2.0, "junk_key_" * 50: 1}
    return RejectedSample(
        timestamp=T0 + timedelta(minutes=minute),
        request_id=request_id,
        record_index=0,
        model_name="m",
        model_version="1",
        features=clean_rejected_features(record, ["a", "b"]),
        rule=rule,
        field="a",
        raw_value=raw_text(value),
        reasons=(("a", rule), ("b", "columns.b.nulls")),
    )


def test_a_mixed_batch_commits_samples_rejected_records_and_overflow_together(store_url):
    store = SqlSampleStore(store_url)
    overflow = RejectedOverflow("x", {minute_of(T0): 7})
    assert store.append([accepted("ok"), refused("bad"), refused("bad2", value="a" * 999),
                         overflow]) == 3  # fmt: skip
    store.append([RejectedOverflow("y", {minute_of(T0): 3})])  # counts add up per minute
    rows = store.read_rejected(*WINDOW)
    assert list(rows.request_id) == ["bad", "bad2"]
    assert rows["a"].iloc[0] == 99.0 and math.isnan(rows["a"].iloc[1])  # text: NaN
    assert len(rows["raw_value"].iloc[1]) == MAX_RAW_VALUE_CHARS  # cut
    assert set(rows.columns) >= {"a", "b", "rule", "field", "raw_value"}
    assert not any(c.startswith("junk") for c in rows.columns)  # extra keys not stored
    stats = store.rejected_stats(*WINDOW)
    assert (stats.rows, stats.overflow) == (2, 10)
    assert stats.by_kind == {"range": 2, "nulls": 2} and stats.by_field == {"a": 2, "b": 2}
    assert store.read_window(*WINDOW).request_id.tolist() == ["ok"]  # scored rows only
    assert store.request_ids() == {"ok"}


def test_a_batch_refused_for_a_known_id_stores_no_rejected_record_either(store_url):
    store = SqlSampleStore(store_url)
    store.append([accepted("dup")])
    with pytest.raises(DuplicateRequestIds):
        store.append([accepted("dup"), refused("bad")], refuse_known_request_ids=True)
    assert store.rejected_stats(*WINDOW).rows == 0
    # A rejected record may reuse an accepted id (a refused retry): ids are not checked.
    store.append([refused("dup")], refuse_known_request_ids=True)
    assert store.rejected_stats(*WINDOW).rows == 1


def test_requests_log_and_retention_of_every_traffic_table(store_url):
    store = SqlSampleStore(store_url)
    old, new = T0 - timedelta(days=40), T0
    store.append_requests([RequestRecord(old, 200, 0.01), RequestRecord(new, 200, 0.02),
                           RequestRecord(new, 503, 0.5)])  # fmt: skip
    store.append([refused("old", minute=-40 * 24 * 60), refused("new"),
                  RejectedOverflow("o", {minute_of(old): 4, minute_of(new): 5})])  # fmt: skip
    stats = store.request_stats(*WINDOW)
    assert (stats.count, stats.errors) == (2, 1) and stats.latencies.tolist() == [0.02, 0.5]
    lease = store.lease(old - timedelta(hours=1), old + timedelta(hours=1))
    kept = store.purge(T0 - timedelta(days=30))
    assert kept.traffic_deleted_rows == 0  # the lease protects the old rows
    store.release(lease)
    result = store.purge(T0 - timedelta(days=30))
    assert result.traffic_deleted_rows == 3  # one rejected record, one request, one minute
    everything = (T0 - timedelta(days=400), T0 + timedelta(days=1))
    assert store.rejected_stats(*everything).rows == 1
    assert store.rejected_stats(*everything).overflow == 5
    assert store.request_stats(*everything).count == 2


def test_request_rows_ride_with_a_batch_in_its_transaction(store_url):
    store = SqlSampleStore(store_url)
    assert store.append([accepted("ok"), RequestRecord(T0, 200, 0.01)]) == 1  # rows, not logs
    with pytest.raises(DuplicateRequestIds):
        store.append([accepted("ok"), RequestRecord(T0, 200, 0.02)], refuse_known_request_ids=True)
    stats = store.request_stats(*WINDOW)
    assert stats.count == 1 and stats.latencies.tolist() == [0.01]  # the refused batch: none
