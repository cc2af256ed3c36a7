"""Rejected traffic is traffic (issue 16): refused records are stored, capped, counted,
and every /predict request's status and latency is logged — through real HTTP on a
real uvicorn server, on SQLite and on PostgreSQL."""

from __future__ import annotations

from driftgate.config.serving import ServingSettings
from driftgate.stores.samples import SqlSampleStore
from tests.serving.conftest import ThreadedService, admin_headers, records_of, wait_for

CAP = 5


def test_rejected_records_are_stored_capped_counted_and_requests_logged(
    registered, tmp_path, sample_url
):
    registered.set_champion("1")
    settings = ServingSettings(
        sample_store_url=sample_url,
        control_store_url=f"sqlite:///{tmp_path / 'control.db'}",
        rejected_max_per_minute=CAP,
        accept_client_timestamps=True,
    )
    good = records_of(registered.rows, 0, 3)
    with ThreadedService(registered.config, settings) as service:
        client = service.client
        # One request: a record out of the contract's range, one with text for a number,
        # one valid record (refused with its request).
        body = {
            "timestamp": "1981-06-01T00:00:00Z",
            "records": [
                {**good[0], "sea_level_pressure": 5.0},
                {**good[1], "temperature": "warm" * 60},
                good[2],
            ],
        }
        refused = client.post("/predict", json=body, headers={"X-Request-ID": "bad-1"})
        assert refused.status_code == 422, refused.text
        assert refused.json()["sample_stored"] is True
        assert refused.headers["X-Driftgate-Sample-Stored"] == "true"
        accepted = client.post(
            "/predict",
            json={"timestamp": "1981-06-01T00:00:00Z", "records": good[:2]},
            headers={"X-Request-ID": "good-1"},
        )
        assert accepted.status_code == 200
        # A retried refused request may reuse its id (nothing was acknowledged as scored).
        again = client.post("/predict", json=body, headers={"X-Request-ID": "bad-1"})
        assert again.status_code == 422 and again.json()["sample_stored"] is False  # 2 of 3 stored
        # A flood: 5 more single-record refusals, all over the cap now.
        for i in range(5):
            flood = client.post(
                "/predict",
                json={"timestamp": "1981-06-01T00:00:30Z",
                      "records": [{**good[0], "dew_point": "junk"}]},
                headers={"X-Request-ID": f"flood-{i}"},
            )  # fmt: skip
            assert flood.status_code == 422 and flood.json()["sample_stored"] is False
        metrics = client.get("/metrics").text
        # Paused: 503s are logged as errors.
        assert (
            client.post(
                "/admin/pause", json={"reason": "test"}, headers=admin_headers()
            ).status_code
            == 200
        )
        wait_for(lambda: client.post("/predict", json={"records": good[:1]}).status_code == 503)
        client.post("/admin/resume", json={"reason": "test"}, headers=admin_headers())

        store = SqlSampleStore(sample_url)
        try:
            wait_for(lambda: store.request_stats("1981-01-01", "1982-01-01").count >= 8)
            # The 503s' rows too: the requests log writes its buffer every second, so the
            # 1981 rows may be in the store before the last 503's row is.
            wait_for(lambda: store.request_stats("2020-01-01", "2100-01-01").errors >= 1)
            window = store.read_rejected("1981-01-01", "1982-01-01")
            stats = store.rejected_stats("1981-01-01", "1982-01-01")
            requests = store.request_stats("1981-01-01", "1982-01-01")
            now = store.request_stats("2020-01-01", "2100-01-01")
            accepted_rows = store.read_window("1981-01-01", "1982-01-01")
        finally:
            store.close()
    # Stored: the first request's 3 records and 2 of the retry (the cap of 5), never scored.
    assert len(window) == CAP
    first = window.iloc[:3]  # in insertion order: the first request
    assert list(first["rule"]) == [
        "columns.sea_level_pressure.range", "columns.temperature.dtype", "request.other_record"
    ]  # fmt: skip
    assert list(first["field"]) == ["sea_level_pressure", "temperature", ""]
    assert first["sea_level_pressure"].iloc[0] == 5.0  # out of range, kept as a number
    assert first["temperature"].isna().iloc[1]  # text for a number: NaN in the blob...
    assert first["raw_value"].iloc[1].startswith('"warmwarm')  # ...and cut text here
    assert len(first["raw_value"].iloc[1]) <= 200
    assert "prediction" not in window.columns
    assert set(accepted_rows.request_id) == {"good-1"}  # rejected rows stay out of samples
    # Overflow: 1 record of the retry + 5 of the flood, in the store and on /metrics.
    assert stats.rows == CAP and stats.overflow == 6
    assert "driftgate_rejected_overflow_records_total 6.0" in metrics
    assert "driftgate_rejected_records_total 5.0" in metrics
    assert stats.by_kind == {"range": 2, "dtype": 2, "other_record": 1}
    assert stats.by_field["sea_level_pressure"] == 2
    # Requests log: 8 replayed (event time 1981): 7 refused, 1 answered; the 503s now.
    assert requests.count == 8 and requests.errors == 0
    assert now.errors >= 1 and now.count >= now.errors
    assert (requests.latencies > 0).all()


def test_the_requests_log_is_capped_per_minute_and_counts_what_it_drops(tmp_path):
    from driftgate.serving.requestlog import RequestLog

    written, dropped, now = [], [], [0.0]
    log = RequestLog(
        lambda rows: written.extend(rows) or len(rows),
        max_per_minute=3,
        on_drop=dropped.append,
        clock=lambda: now[0],
    )
    for _ in range(5):
        log.add(200, 0.01)
    now[0] = 61.0  # the next minute starts afresh
    log.add(503, 0.02)
    log.close()  # writes what is buffered
    assert [r.status for r in written] == [200, 200, 200, 503]
    assert sum(dropped) == 2


def test_rows_the_store_refuses_are_dropped_and_counted_never_retried_forever():
    """Found in review: every SQLAlchemyError was retried, so a batch the store refuses
    (a StatementError, an IntegrityError) went back to the front of the buffer on every
    flush and blocked every later row. An outage (OperationalError) is still retried."""
    from sqlalchemy.exc import OperationalError, StatementError

    from driftgate.serving.requestlog import RequestLog

    written, dropped, failures = [], [], [StatementError("refused", None, {}, TypeError("x"))]
    failures.append(OperationalError("INSERT", {}, Exception("database is locked")))

    def append(rows):
        if failures:
            raise failures.pop(0)
        written.extend(rows)
        return len(rows)

    log = RequestLog(append, on_drop=dropped.append)
    log.add(500, 0.1)
    assert log.flush() == 0 and dropped == [1]  # refused: dropped and counted
    log.add(503, 0.2)
    assert log.flush() == 0 and dropped == [1]  # an outage: kept for the retry
    assert log.flush() == 1 and [r.status for r in written] == [503]
