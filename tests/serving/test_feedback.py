"""``POST /feedback`` through real HTTP, a real MLflow store and real stores (every test
on SQLite and on PostgreSQL): the fuzz list of issue 16 with its 4xx answers, idempotence,
labels before their request, the horizon, the token, and a restart."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from driftgate.config.serving import ServingSettings
from driftgate.stores.labels import LabelStore
from driftgate.stores.samples import Sample, SqlSampleStore
from tests.driftgate.stores.conftest import _postgres_database
from tests.serving.conftest import ThreadedService, admin_headers, records_of


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def stores(request, tmp_path_factory):
    """Samples and labels on each back end (the whole module runs on both)."""
    folder = tmp_path_factory.mktemp("feedback-stores")
    control = f"sqlite:///{folder / 'control.db'}"
    if request.param == "sqlite":
        yield {
            "sample_store_url": f"sqlite:///{folder / 'samples.db'}",
            "control_store_url": control,
        }
    else:
        for url in _postgres_database():
            yield {"sample_store_url": url, "control_store_url": control}


@pytest.fixture(scope="module")
def settings(stores) -> ServingSettings:
    return ServingSettings(**stores, label_horizon="1h", max_records_per_request=50)


@pytest.fixture(scope="module")
def service(registered, settings):
    registered.set_champion("1")
    with ThreadedService(registered.config, settings) as running:
        yield running


def predict(service, registered, request_id: str, records: int = 3):
    answer = service.client.post(
        "/predict",
        json={"records": records_of(registered.rows, 0, records)},
        headers={"X-Request-ID": request_id},
    )
    assert answer.status_code == 200, answer.text
    return answer.json()


def send(service, labels, headers=None):
    return service.client.post(
        "/feedback", json=labels, headers=admin_headers() if headers is None else headers
    )


def test_labels_are_stored_and_idempotent(service, registered, stores):
    predict(service, registered, "fb-ok", records=3)
    labels = [{"request_id": "fb-ok", "record_index": i, "label": i % 2} for i in range(3)]
    first = send(service, labels)
    assert first.status_code == 200, first.text
    assert first.json()["accepted"] == 3 and first.json()["duplicates"] == 0
    again = send(service, labels)  # a client retrying after a lost answer
    assert again.status_code == 200
    assert again.json()["accepted"] == 0 and again.json()["duplicates"] == 3
    store = LabelStore(stores["sample_store_url"])
    try:
        window = store.labelled_window(
            datetime.now(UTC) - timedelta(hours=1), datetime.now(UTC) + timedelta(hours=1)
        )
    finally:
        store.close()
    mine = window[window.request_id == "fb-ok"].sort_values("record_index")
    assert list(mine.label) == ["0", "1", "0"]
    assert list(mine.value) == [0.0, 1.0, 0.0]


def test_a_conflicting_label_is_409_and_stores_nothing_of_the_request(service, registered):
    predict(service, registered, "fb-conflict", records=2)
    assert send(service, [{"request_id": "fb-conflict", "record_index": 0, "label": 1}]).is_success
    answer = send(
        service,
        [
            {"request_id": "fb-conflict", "record_index": 1, "label": 0},  # fine alone
            {"request_id": "fb-conflict", "record_index": 0, "label": 0},  # conflicts
        ],
    )
    assert answer.status_code == 409, answer.text
    body = answer.json()
    assert [(e["record"], e["field"]) for e in body["errors"]] == [(1, "label")]
    # The reason says what happened, never what is stored (issue 28: it echoed '1').
    assert body["errors"][0]["reason"].startswith("a different label is stored")
    assert "'1'" not in answer.text
    # All or nothing: record 1's label was not stored either.
    retry = send(service, [{"request_id": "fb-conflict", "record_index": 1, "label": 0}])
    assert retry.json()["accepted"] == 1


def test_two_different_labels_for_one_record_in_one_request_conflict(service, registered):
    predict(service, registered, "fb-twice", records=1)
    answer = send(
        service,
        [
            {"request_id": "fb-twice", "record_index": 0, "label": 1},
            {"request_id": "fb-twice", "record_index": 0, "label": 0},
        ],
    )
    assert answer.status_code == 409
    assert answer.json()["errors"][0]["record"] == 1


def test_unknown_ids_are_404_naming_them(service, registered):
    predict(service, registered, "fb-known", records=1)
    answer = send(
        service,
        [
            {"request_id": "fb-known", "record_index": 0, "label": 1},
            {"request_id": "fb-never-sent", "record_index": 0, "label": 1},
            {"request_id": "fb-known", "record_index": 7, "label": 0},  # no such record
        ],
    )
    assert answer.status_code == 404, answer.text
    named = [(e["record"], e["request_id"], e["record_index"]) for e in answer.json()["errors"]]
    assert named == [(1, "fb-never-sent", 0), (2, "fb-known", 7)]
    assert answer.headers["Retry-After"] == "1"
    assert (
        send(service, [{"request_id": "fb-known", "record_index": 0, "label": 1}]).json()[
            "accepted"
        ]
        == 1
    )  # the 404 stored nothing


def test_a_label_before_its_request_is_404_then_accepted_once_it_is_stored(service, registered):
    early = send(service, [{"request_id": "fb-early", "record_index": 0, "label": 0}])
    assert early.status_code == 404
    assert "Retry-After" in early.headers
    predict(service, registered, "fb-early", records=1)
    late = send(service, [{"request_id": "fb-early", "record_index": 0, "label": 0}])
    assert late.status_code == 200 and late.json()["accepted"] == 1


@pytest.mark.parametrize(
    "label, reason",
    [
        (2, "must be the integer 0 or 1, got 2"),
        (0.5, "must be the integer 0 or 1, got 0.5"),
        ("1", "must be the integer 0 or 1, got '1'"),
        (1.0, "must be the integer 0 or 1, got 1.0"),
    ],
)
def test_a_label_of_the_wrong_type_for_a_binary_model_is_422(service, registered, label, reason):
    request_id = f"fb-type-{abs(hash(repr(label)))}"
    predict(service, registered, request_id, records=1)
    answer = send(service, [{"request_id": request_id, "record_index": 0, "label": label}])
    assert answer.status_code == 422, answer.text
    error = answer.json()["errors"][0]
    assert (error["record"], error["field"]) == (0, "label")
    assert reason in error["reason"]


@pytest.mark.parametrize(
    "body, field",
    [
        ([{"request_id": "x", "record_index": 0}], "label"),
        ([{"request_id": "x", "record_index": -1, "label": 1}], "record_index"),
        ([{"request_id": "x", "record_index": "0", "label": 1}], "record_index"),
        ([{"request_id": "x y", "record_index": 0, "label": 1}], "request_id"),
        ([{"request_id": "x", "record_index": 0, "label": True}], "label"),
        ([{"request_id": "x", "record_index": 0, "label": None}], "label"),
        ([{"request_id": "x", "record_index": 0, "label": [1]}], "label"),
        ([{"request_id": "x", "record_index": 0, "label": 1, "extra": 1}], "extra"),
    ],
)
def test_a_malformed_body_is_422_naming_the_field(service, body, field):
    answer = send(service, body)
    assert answer.status_code == 422, answer.text
    errors = answer.json()["errors"]
    assert any(e["field"] == field and e["record"] == 0 for e in errors), errors


def test_empty_too_many_and_unreadable_bodies(service):
    assert send(service, []).status_code == 422
    many = [{"request_id": "x", "record_index": i, "label": 1} for i in range(51)]
    too_many = send(service, many)
    assert too_many.status_code == 422 and "at most 50" in too_many.json()["detail"]
    broken = service.client.post(
        "/feedback", content=b"[{", headers={**admin_headers(), "Content-Type": "application/json"}
    )
    assert broken.status_code in (400, 422)


def test_a_label_beyond_the_horizon_is_422(service, stores):
    # A sample served two hours ago (serving.label_horizon is 1h here), in the real store.
    served = datetime.now(UTC) - timedelta(hours=2)
    samples = SqlSampleStore(stores["sample_store_url"])
    try:
        samples.append(
            [
                Sample(
                    timestamp=served, received_at=served, request_id="fb-old", record_index=0,
                    model_name="served", model_version="1", features={"x": 1.0},
                    prediction=0.7, predicted_class=1,
                )
            ]
        )  # fmt: skip
    finally:
        samples.close()
    answer = send(service, [{"request_id": "fb-old", "record_index": 0, "label": 1}])
    assert answer.status_code == 422, answer.text
    error = answer.json()["errors"][0]
    assert error["field"] == "request_id" and "label_horizon" in error["reason"]


def test_the_token_is_checked_before_the_body(service):
    labels = [{"request_id": "fb-ok", "record_index": 0, "label": 0}]
    assert send(service, labels, headers={}).status_code == 401
    assert send(service, labels, headers=admin_headers("wrong")).status_code == 403
    # Even a malformed body gets 401 first: nothing about the format leaks.
    assert send(service, [{"nonsense": 1}], headers={}).status_code == 401


def test_labels_survive_a_restart_and_auth_can_be_off(registered, settings, stores):
    open_settings = settings.model_copy(update={"feedback_auth": "none"})
    with ThreadedService(registered.config, open_settings) as first:
        predict(first, registered, "fb-restart", records=2)
        labels = [{"request_id": "fb-restart", "record_index": i, "label": 1} for i in range(2)]
        assert first.client.post("/feedback", json=labels).json()["accepted"] == 2
    with ThreadedService(registered.config, open_settings) as second:
        again = second.client.post("/feedback", json=labels)  # no token: auth is off
        # An unverified sender is told "already labelled" whether its label matches the
        # stored one or not (a duplicate answer would tell it the stored label).
        assert again.status_code == 409 and again.json()["counts"]["conflicts"] == 2
        conflict = second.client.post(
            "/feedback", json=[{"request_id": "fb-restart", "record_index": 0, "label": 0}]
        )
        assert conflict.status_code == 409
        assert conflict.json()["errors"][0]["reason"] == again.json()["errors"][0]["reason"]
        with_token = second.client.post("/feedback", json=labels, headers=admin_headers())
        assert with_token.json()["corrected"] == 2  # the admin's word replaces no one's


def test_corrections_replace_a_label_when_allowed(registered, settings):
    correcting = settings.model_copy(update={"label_corrections": True})
    with ThreadedService(registered.config, correcting) as running:
        predict(running, registered, "fb-correct", records=1)
        first = send(running, [{"request_id": "fb-correct", "record_index": 0, "label": 1}])
        assert first.json()["accepted"] == 1
        fixed = send(running, [{"request_id": "fb-correct", "record_index": 0, "label": 0}])
        assert fixed.status_code == 200 and fixed.json()["corrected"] == 1
        again = send(running, [{"request_id": "fb-correct", "record_index": 0, "label": 0}])
        assert again.json()["duplicates"] == 1


# -- fuzzing ----------------------------------------------------------------------------
FUZZ_IDS = [f"fb-fuzz-{i}" for i in range(3)]
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=300),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner,
                                                                max_size=3),
    max_leaves=5,
)  # fmt: skip
ITEMS = st.fixed_dictionaries(
    {
        "request_id": st.sampled_from([*FUZZ_IDS, "fb-fuzz-unknown"]) | JSON_VALUES,
        "record_index": st.integers(-2, 4) | JSON_VALUES,
        "label": st.sampled_from([0, 1]) | JSON_VALUES,
    },
    optional={"extra": JSON_VALUES},
)


@pytest.fixture(scope="module")
def fuzz_ids(service, registered):
    for request_id in FUZZ_IDS:
        predict(service, registered, request_id, records=3)
    return FUZZ_IDS


def _stored_labels(url: str) -> int:
    store = LabelStore(url)
    try:
        now = datetime.now(UTC)
        return store.count(now - timedelta(days=1), now + timedelta(days=1))
    finally:
        store.close()


@hypothesis_settings(
    max_examples=80,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(body=st.lists(ITEMS, min_size=0, max_size=6) | JSON_VALUES)
def test_fuzzed_feedback_is_a_clear_4xx_or_stored_exactly(service, stores, fuzz_ids, body):
    before = _stored_labels(stores["sample_store_url"])
    answer = send(service, body)
    after = _stored_labels(stores["sample_store_url"])
    assert answer.status_code in (200, 404, 409, 422), (answer.status_code, answer.text)
    if answer.status_code == 200:
        assert after - before == answer.json()["accepted"]
        return
    assert after == before  # a refused request stores nothing
    errors = answer.json()["errors"]
    # Every error names its field (a key may be called "": named as it is).
    assert errors and all(isinstance(e.get("field"), str) for e in errors), answer.text


def test_labels_sent_over_http_drive_a_performance_monitor(service, registered, stores):
    """The loop end to end: /predict, then /feedback with labels that contradict every
    prediction, then the drift check's performance monitor on the same stores."""
    from driftgate.gates.config import load_gate_config
    from driftgate.jobs import drift_check as job
    from driftgate.monitors.rules import Monitor

    for r in range(4):
        answer = predict(service, registered, f"fb-loop-{r}", records=50)
        wrong = [
            {"request_id": f"fb-loop-{r}", "record_index": i, "label": 1 - c}
            for i, c in enumerate(answer["classes"])
        ]
        assert send(service, wrong).json()["accepted"] == 50
    config = registered.config.model_copy(deep=True)
    config.serving = config.serving.model_copy(update=stores)
    monitor = Monitor(
        name="accuracy-drop", metric="performance:accuracy", threshold=0.1,
        schedule="0 * * * *", window="1h", action="notify", min_labels=100,
    )  # fmt: skip
    gates = load_gate_config().model_copy(update={"monitors": [monitor]})
    now = datetime.now(UTC)
    start, end = now - timedelta(minutes=30), now + timedelta(minutes=1)
    verdict = job.judge_window(config, gates, start, end)
    (result,) = verdict.results
    assert result.status == "ok" and result.breached, result.reason
    assert result.labels >= 200 and result.realized < 0.2
    assert result.baseline > 0.5  # the served champion's test_accuracy


def test_a_label_of_a_request_the_service_did_not_log_is_counted_unsampled(registered, settings):
    half = settings.model_copy(update={"sample_fraction": 0.5})
    with ThreadedService(registered.config, half) as running:
        is_sampled = running.state.sampling.keeps  # under the store's own key
        skipped = next(f"fb-skip-{i}" for i in range(100) if not is_sampled(f"fb-skip-{i}"))
        answer = predict(running, registered, skipped, records=1)
        assert answer["sampled"] is False
        labelled = send(running, [{"request_id": skipped, "record_index": 0, "label": 1}])
        assert labelled.status_code == 200, labelled.text
        assert labelled.json()["unsampled"] == 1 and labelled.json()["accepted"] == 0
        # An id the service never saw, that it would have logged, is still a 404.
        logged = next(f"fb-typo-{i}" for i in range(100) if is_sampled(f"fb-typo-{i}"))
        assert (
            send(running, [{"request_id": logged, "record_index": 0, "label": 1}]).status_code
            == 404
        )


def test_the_service_samples_accepted_and_refused_requests_by_id_and_records_the_fraction(
    registered, settings
):
    """serving.sample_fraction 0.5 over HTTP: a request whose id hashes out is answered
    and neither its records nor its refusal are stored; a kept one is stored with its
    fraction, so the window stands for twice its rows."""
    half = settings.model_copy(update={"sample_fraction": 0.5})
    bad = {**records_of(registered.rows, 0, 1)[0], "sea_level_pressure": 5.0}  # out of range
    start = datetime.now(UTC)
    with ThreadedService(registered.config, half) as running:
        is_sampled = running.state.sampling.keeps  # under the store's own key
        kept = [f"fr-keep-{i}" for i in range(40) if is_sampled(f"fr-keep-{i}")][:2]
        dropped = [f"fr-drop-{i}" for i in range(40) if not is_sampled(f"fr-drop-{i}")][:2]
        assert predict(running, registered, kept[0], records=3)["sampled"] is True
        assert predict(running, registered, dropped[0], records=3)["sampled"] is False
        for request_id, stored in ((kept[1], True), (dropped[1], False)):
            refused = running.client.post(
                "/predict", json={"records": [bad]}, headers={"X-Request-ID": request_id}
            )
            assert refused.status_code == 422 and refused.json()["sample_stored"] is stored
    store = SqlSampleStore(settings.sample_store_url)
    try:
        end = datetime.now(UTC) + timedelta(seconds=1)
        window = store.read_window(start, end)
        assert set(window["request_id"]) == {kept[0]}
        stats = store.window_stats(start, end)
        assert (stats.rows, stats.estimated_records) == (3, 6.0)
        assert stats.min_fraction == stats.max_fraction == 0.5
        assert set(store.read_rejected(start, end)["request_id"]) == {kept[1]}
    finally:
        store.close()
