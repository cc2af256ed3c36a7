"""The inference service through real HTTP, a real MLflow store and real SQLite stores.

One service runs for the module (loading a model costs seconds); each test uses its
own request ids and time window, and tests that pause resume before they end.
"""

from __future__ import annotations

import json
import logging
import math
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from driftgate.config.serving import ServingSettings
from driftgate.stores.control import ControlStore
from driftgate.stores.samples import SqlSampleStore
from tests.serving.conftest import (
    ADMIN_TOKEN,
    ThreadedService,
    admin_headers,
    admin_token_env,
    records_of,
    wait_for,
)

POLL_SECONDS = 0.3


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    folder = tmp_path_factory.mktemp("service-stores")
    return {
        "sample_store_url": f"sqlite:///{folder / 'samples.db'}",
        "control_store_url": f"sqlite:///{folder / 'control.db'}",
    }


@pytest.fixture(scope="module")
def settings(stores) -> ServingSettings:
    return ServingSettings(
        **stores, model_poll_seconds=POLL_SECONDS, pause_poll_seconds=POLL_SECONDS
    )


@pytest.fixture(scope="module")
def service(registered, settings):
    registered.set_champion("1")
    with ThreadedService(registered.config, settings) as running:
        yield running


def test_health_and_readiness(service):
    assert service.client.get("/healthz").json() == {"status": "ok"}
    ready = service.client.get("/readyz")
    assert ready.status_code == 200, ready.text
    assert ready.json()["model_version"] == "1"
    assert ready.json()["paused"] is False


def test_predictions_equal_the_registered_models(service, registered):
    records = records_of(registered.rows, 0, 50)
    response = service.client.post("/predict", json={"records": records})
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["model_version"] == "1" and body["model_name"] == "served"
    assert body["request_id"] == response.headers["X-Request-ID"]
    expected = registered.expected("1", records)
    np.testing.assert_allclose(body["probabilities"], expected, rtol=1e-5, atol=1e-6)
    assert body["classes"] == [int(p >= 0.5) for p in expected]


def test_acknowledged_samples_are_in_the_store(service, registered, stores):
    before = datetime.now(UTC)
    records = records_of(registered.rows, 100, 3)
    ids = [f"stored-{i}" for i in range(5)]
    answers = [
        service.client.post("/predict", json={"records": records}, headers={"X-Request-ID": rid})
        for rid in ids
    ]
    assert [a.status_code for a in answers] == [200] * 5
    window = SqlSampleStore(stores["sample_store_url"]).read_window(before, datetime.now(UTC))
    window = window[window.request_id.isin(ids)]
    assert len(window) == 15  # committed before each 200 was sent: no waiting needed
    assert list(window.columns[:6]) == [
        "timestamp", "received_at", "model_name", "model_version", "request_id", "record_index"
    ]  # fmt: skip
    first = window[window.request_id == "stored-0"].sort_values("record_index")
    assert first[registered.features].to_dict("records") == records
    np.testing.assert_allclose(first.prediction, answers[0].json()["probabilities"])
    assert set(window.model_version) == {"1"}


@pytest.mark.parametrize(
    ("change", "field", "reason_part"),
    [
        # Text passes the schema (categorical fields take it); the contract names the field.
        ({"temperature": "warm"}, "temperature", "expected float, got str"),
        ({"temperature": 99.0}, "temperature", "outside"),
        ({"visibility": math.nan}, "visibility", "non-finite"),
        ({"temprature": 0.1}, "temprature", "not in the contract"),
        ({"sea_level_pressure": True}, "sea_level_pressure", ""),
    ],
)
def test_422_names_the_failing_field(service, registered, stores, change, field, reason_part):
    good = records_of(registered.rows, 0, 2)
    bad = {**good[1], **change}
    # json.dumps writes NaN as the (non-standard) token NaN, as some clients do.
    response = service.client.post(
        "/predict",
        content=json.dumps({"records": [good[0], bad]}),
        headers={"X-Request-ID": f"bad-{field}", "Content-Type": "application/json"},
    )
    assert response.status_code == 422, response.text
    errors = response.json()["errors"]
    assert {(e["record"], e["field"]) for e in errors} == {(1, field)}
    assert reason_part in errors[0]["reason"]
    assert "bad-" + field not in SqlSampleStore(stores["sample_store_url"]).request_ids()


def test_a_null_feature_is_scored_with_the_training_mean_and_stored_as_missing(
    service, registered, stores
):
    (record,) = records_of(registered.rows, 200, 1)
    train_mean = registered.versions["1"].feature_mean[registered.features.index("dew_point")]
    at_mean = {**record, "dew_point": float(train_mean)}
    response = service.client.post(
        "/predict",
        json={"records": [{**record, "dew_point": None}]},
        headers={"X-Request-ID": "sensor-gap"},
    )
    assert response.status_code == 200, response.text
    (probability,) = response.json()["probabilities"]
    np.testing.assert_allclose(probability, registered.expected("1", [at_mean])[0], rtol=1e-5)
    window = SqlSampleStore(stores["sample_store_url"]).read_window(
        datetime(2000, 1, 1, tzinfo=UTC), datetime.now(UTC)
    )
    stored = window[window.request_id == "sensor-gap"]
    assert stored["dew_point"].isna().all()  # the drift check counts it as missing


def test_missing_feature_and_empty_request_are_422(service, registered):
    record = records_of(registered.rows, 0, 1)[0]
    del record["visibility"]
    missing = service.client.post("/predict", json={"records": [record]})
    assert missing.status_code == 422
    assert missing.json()["errors"][0]["field"] == "visibility"
    assert service.client.post("/predict", json={"records": []}).status_code == 422
    assert service.client.post("/predict", json={"rows": [record]}).status_code == 422


def test_client_timestamps_are_refused_unless_enabled(service, registered):
    records = records_of(registered.rows, 0, 1)
    response = service.client.post(
        "/predict", json={"records": records, "timestamp": "2020-01-01T00:00:00Z"}
    )
    assert response.status_code == 422
    assert response.json()["errors"][0]["field"] == "timestamp"


def test_admin_endpoints_need_the_token(service, caplog):
    caplog.set_level(logging.DEBUG)
    body = {"reason": "should not happen"}
    missing = service.client.post("/admin/pause", json=body)
    assert missing.status_code == 401
    assert missing.headers["WWW-Authenticate"] == "Bearer"
    basic = service.client.post("/admin/pause", json=body, headers={"Authorization": "Basic x"})
    assert basic.status_code == 401
    wrong = service.client.post("/admin/pause", json=body, headers=admin_headers("not-it"))
    assert wrong.status_code == 403
    assert service.client.get("/admin/state").status_code == 401
    assert service.client.post("/predict", json={"records": []}).status_code == 422
    state = service.client.get("/admin/state", headers=admin_headers()).json()
    assert state["state"]["paused"] is False
    assert ADMIN_TOKEN not in caplog.text


def test_pause_refuses_predictions_with_the_reason_then_resume(service, registered, stores):
    records = records_of(registered.rows, 0, 1)
    paused = service.client.post(
        "/admin/pause",
        json={
            "reason": "sensor visibility missing in 40% of the window",
            "by": "monitor:missing-data",
            "monitor": "missing-data",
            "window_start": "2026-01-01T00:00:00Z",
            "window_end": "2026-01-01T01:00:00Z",
            "evidence": ["runs:/abc/report.html"],
            "review_id": "review-42",
        },
        headers=admin_headers(),
    )
    assert paused.status_code == 200 and paused.json()["changed"] is True
    refused = service.client.post(
        "/predict", json={"records": records}, headers={"X-Request-ID": "while-paused"}
    )
    assert refused.status_code == 503
    body = refused.json()
    assert body["paused"] is True and body["review_id"] == "review-42"
    assert body["reason"] == "sensor visibility missing in 40% of the window"
    assert body["monitor"] == "missing-data" and body["evidence"] == ["runs:/abc/report.html"]
    assert "while-paused" not in SqlSampleStore(stores["sample_store_url"]).request_ids()
    metrics = service.client.get("/metrics").text
    assert "driftgate_inference_paused 1.0" in metrics
    assert "driftgate_paused_requests_total 1.0" in metrics
    assert service.client.get("/readyz").json()["paused"] is True

    resumed = service.client.post(
        "/admin/resume", json={"reason": "sensor fixed", "by": "alice"}, headers=admin_headers()
    )
    assert resumed.status_code == 200 and resumed.json()["changed"] is True
    assert service.client.post("/predict", json={"records": records}).status_code == 200
    events = ControlStore(stores["control_store_url"]).events("served", limit=2)
    assert [(e.action, e.actor) for e in events] == [
        ("resume", "alice"),
        ("pause", "monitor:missing-data"),
    ]
    assert events[0].review_id == "review-42"  # the resume names the pause it ends


def test_pause_from_another_process_applies_within_the_poll(service, registered, stores):
    records = records_of(registered.rows, 0, 1)
    control = ControlStore(stores["control_store_url"])
    control.pause("served", reason="drift check: pressure drifted", actor="monitor:drift")
    try:
        refused = wait_for(
            lambda: (
                (r := service.client.post("/predict", json={"records": records})).status_code == 503
                and r
            ),
            timeout=POLL_SECONDS * 10,
            what="the pause to reach the service",
        )
        assert refused.json()["reason"] == "drift check: pressure drifted"
    finally:
        control.resume("served", reason="reviewed", actor="cli:test")
    wait_for(
        lambda: service.client.post("/predict", json={"records": records}).status_code == 200,
        timeout=POLL_SECONDS * 10,
        what="the resume to reach the service",
    )


def test_metrics_expose_requests_latency_and_batches(service, registered):
    names = (
        'driftgate_http_requests_total{path="/predict",status="200"}',
        "driftgate_http_request_duration_seconds_bucket",
        "driftgate_samples_written_total",
        "driftgate_sample_batch_samples_bucket",
        "driftgate_sample_batch_requests_count",
        "driftgate_inference_paused",
        "driftgate_pauses_total",
        "driftgate_model_version 1.0",
    )
    # Its own prediction first: run alone, no earlier test of the module has sent one
    # (a path's series appear with its first request, a batch's with the writer's).
    answered = service.client.post("/predict", json={"records": records_of(registered.rows, 0, 1)})
    assert answered.status_code == 200, answered.text

    def missing() -> list[str]:
        text = service.client.get("/metrics").text
        return [name for name in names if name not in text]

    first = missing()
    wait_for(lambda: not missing(), what=f"every series on /metrics (missing at first: {first})")


def test_metrics_show_each_monitors_latest_verdict_insufficient_data_included(
    service, registered, stores
):
    """Issue 15: a window too small to decide is reported on /metrics as itself, never
    as a pass; a catch-up of an older window does not overwrite the newest verdict."""
    from driftgate.monitors.hysteresis import Firing
    from driftgate.monitors.rules import MonitorResult
    from driftgate.stores.monitor_state import MonitorStateStore

    def verdict(status: str, breached: bool, observed: float | None) -> MonitorResult:
        return MonitorResult(
            monitor="mean-shift-kl", metric="kl", action="open_review", threshold=0.1,
            breached=breached, observed=observed, status=status, p_value=0.5, level=1e-5,
        )  # fmt: skip

    state = MonitorStateStore(stores["control_store_url"])
    name = registered.config.model.name
    try:
        for start, end, result in (
            ("2040-01-01T01:00", "2040-01-01T02:00", verdict("insufficient_data", False, 6.1)),
            ("2040-01-01T00:00", "2040-01-01T01:00", verdict("ok", True, 0.4)),  # older
        ):
            state.record_status(
                model_name=name, model_version="1", result=result, firing=Firing(0, False),
                window_start=start, window_end=end,
            )  # fmt: skip
    finally:
        state.close()
    text = service.client.get("/metrics").text
    labels = 'metric="kl",model_version="1",monitor="mean-shift-kl"'
    assert "driftgate_monitor_status_readable 1.0" in text
    assert f'driftgate_monitor_status{{{labels},status="insufficient_data"}} 1.0' in text
    assert f'driftgate_monitor_status{{{labels},status="ok"}} 0.0' in text
    assert f"driftgate_monitor_breached{{{labels}}} 0.0" in text
    assert f"driftgate_monitor_observed{{{labels}}} 6.1" in text
    (end_line,) = [
        line for line in text.splitlines() if line.startswith("driftgate_monitor_window_end")
    ]
    assert float(end_line.split()[-1]) == datetime(2040, 1, 1, 2, tzinfo=UTC).timestamp()


def test_pause_survives_a_restart(registered, settings, stores, tmp_path):
    """A new service process on the same stores starts paused; then client timestamps."""
    control = ControlStore(stores["control_store_url"])
    control.pause("served", reason="restart test", actor="test", review_id="r-restart")
    restarted_settings = settings.model_copy(update={"accept_client_timestamps": True})
    records = records_of(registered.rows, 0, 1)
    try:
        with ThreadedService(registered.config, restarted_settings) as restarted:
            first = restarted.client.post("/predict", json={"records": records})
            assert first.status_code == 503
            assert first.json()["review_id"] == "r-restart"
            with admin_token_env():
                resume = restarted.client.post(
                    "/admin/resume", json={"reason": "done"}, headers=admin_headers()
                )
            assert resume.json()["changed"] is True
            event_time = datetime(2001, 2, 3, tzinfo=UTC)
            stamped = restarted.client.post(
                "/predict",
                json={"records": records, "timestamp": event_time.isoformat()},
                headers={"X-Request-ID": "replayed"},
            )
            assert stamped.status_code == 200, stamped.text
        window = SqlSampleStore(stores["sample_store_url"]).read_window(
            event_time, event_time + timedelta(seconds=1)
        )
        assert list(window.request_id) == ["replayed"]
    finally:
        control.resume("served", reason="cleanup", actor="test")


def test_alias_move_reloads_the_model(service, registered):
    """Last in the module: it moves the champion to v2."""
    records = records_of(registered.rows, 200, 20)
    registered.set_champion("2")
    try:
        response = wait_for(
            lambda: (
                (r := service.client.post("/predict", json={"records": records}))
                .json()
                .get("model_version")
                == "2"
                and r
            ),
            timeout=30,
            what="the service to load v2",
        )
        np.testing.assert_allclose(
            response.json()["probabilities"],
            registered.expected("2", records),
            rtol=1e-5,
            atol=1e-6,
        )
        assert not np.allclose(registered.expected("1", records), registered.expected("2", records))
        assert service.client.get("/readyz").json()["model_version"] == "2"
        assert (
            'driftgate_model_reloads_total{outcome="loaded"} 2.0'
            in service.client.get("/metrics").text
        )
    finally:
        registered.set_champion("1")
