"""Who sent a label (issue 28, item 2), over real HTTP with real uvicorn, a real MLflow
store and real SQLite and PostgreSQL label stores: by default ``POST /feedback`` needs
a token and each label is stored with its source's name; ``feedback_auth: none`` stores
a label without a token as ``unverified``; and no answer tells a client a stored label.
A label table made before the source column is migrated when a store opens it."""

from __future__ import annotations

import sqlite3
import uuid

import pytest
from sqlalchemy import text

from driftgate.config.serving import ServingSettings
from driftgate.stores._sql import create_store_engine
from driftgate.stores.labels import LABELS_TABLE, LabelStore
from driftgate.stores.samples import SqlSampleStore
from tests.driftgate.stores.conftest import _postgres_database
from tests.serving.conftest import ThreadedService, admin_headers, records_of

CRM_ENV, CRM_TOKEN = "DRIFTGATE_TEST_CRM_LABELS", "crm-labels-token-91c2"


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def store_url(request, tmp_path_factory):
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path_factory.mktemp('provenance') / 'samples.db'}"
    else:
        yield from _postgres_database()


@pytest.fixture(scope="module")
def settings(store_url, tmp_path_factory) -> ServingSettings:
    control = f"sqlite:///{tmp_path_factory.mktemp('provenance-control') / 'control.db'}"
    return ServingSettings(
        sample_store_url=store_url,
        control_store_url=control,
        label_sources={"crm": CRM_ENV},
        label_horizon="1h",
    )


@pytest.fixture
def crm_token(monkeypatch):
    monkeypatch.setenv(CRM_ENV, CRM_TOKEN)
    return {"Authorization": f"Bearer {CRM_TOKEN}"}


def predict(service, registered, records: int = 2) -> str:
    request_id = f"prov-{uuid.uuid4().hex[:12]}"
    answer = service.client.post(
        "/predict",
        json={"records": records_of(registered.rows, 0, records)},
        headers={"X-Request-ID": request_id},
    )
    assert answer.status_code == 200, answer.text
    return request_id


def stored(url: str, request_id: str) -> dict[int, tuple[str, str]]:
    """record index -> (label, source), read from the store, not from an answer."""
    store = LabelStore(url)
    try:
        found = store.stored_of([(request_id, i) for i in range(10)])
    finally:
        store.close()
    return {index: (s.label, s.source) for (_, index), s in found.items()}


def label(request_id: str, index: int, value: int) -> list[dict]:
    return [{"request_id": request_id, "record_index": index, "label": value}]


def test_by_default_feedback_needs_a_token_and_stores_its_sources_name(
    registered, settings, store_url, crm_token
):
    assert ServingSettings().feedback_auth == "token"  # the default, with no serving section
    registered.set_champion("1")
    with ThreadedService(registered.config, settings) as service:
        request_id = predict(service, registered)
        refused = service.client.post("/feedback", json=label(request_id, 0, 1))
        assert refused.status_code == 401, refused.text
        wrong = service.client.post(
            "/feedback", json=label(request_id, 0, 1), headers=admin_headers("guessed")
        )
        assert wrong.status_code == 403, wrong.text
        assert stored(store_url, request_id) == {}  # nothing stored by either
        by_crm = service.client.post("/feedback", json=label(request_id, 0, 1), headers=crm_token)
        assert by_crm.status_code == 200 and by_crm.json()["accepted"] == 1, by_crm.text
        by_admin = service.client.post(
            "/feedback", json=label(request_id, 1, 0), headers=admin_headers()
        )
        assert by_admin.status_code == 200, by_admin.text
    assert stored(store_url, request_id) == {0: ("1", "crm"), 1: ("0", "admin")}


def test_open_feedback_is_stored_as_unverified_and_a_token_still_names_its_source(
    registered, settings, store_url, crm_token
):
    open_settings = settings.model_copy(update={"feedback_auth": "none"})
    registered.set_champion("1")
    with ThreadedService(registered.config, open_settings) as service:
        request_id = predict(service, registered)
        anyone = service.client.post("/feedback", json=label(request_id, 0, 1))
        assert anyone.status_code == 200, anyone.text
        named = service.client.post("/feedback", json=label(request_id, 1, 1), headers=crm_token)
        assert named.status_code == 200, named.text
        guessed = service.client.post(
            "/feedback", json=label(request_id, 1, 1), headers=admin_headers("guessed")
        )
        assert guessed.status_code == 403  # a wrong token is not taken as "no token"
    assert stored(store_url, request_id) == {0: ("1", "unverified"), 1: ("1", "crm")}


def test_a_409_tells_a_client_nothing_of_the_stored_label(
    registered, settings, store_url, crm_token
):
    """Before: the 409's reason said "label '0' conflicts with the stored '1'", and an
    open client could also tell the stored label by the answer to each guess (200
    duplicate for the stored one, 409 for the other)."""
    open_settings = settings.model_copy(update={"feedback_auth": "none"})
    registered.set_champion("1")
    with ThreadedService(registered.config, open_settings) as service:
        request_id = predict(service, registered)
        stored_one = service.client.post(
            "/feedback", json=label(request_id, 0, 1), headers=crm_token
        )
        assert stored_one.status_code == 200
        answers = {
            guess: service.client.post("/feedback", json=label(request_id, 0, guess))
            for guess in (0, 1)
        }
        # A verified sender's conflicting label: refused, without the stored one either.
        verified = service.client.post(
            "/feedback", json=label(request_id, 0, 0), headers=admin_headers()
        )
    for guess, answer in answers.items():
        assert answer.status_code == 409, (guess, answer.text)
        assert "stored '" not in answer.text and "'1'" not in answer.text, answer.text
    # The same answer whichever label was guessed: no oracle in the status or the body.
    bodies = [{k: v for k, v in a.json().items() if k != "request_id"} for a in answers.values()]
    assert bodies[0] == bodies[1], bodies
    assert verified.status_code == 409 and "'1'" not in verified.text, verified.text
    assert stored(store_url, request_id) == {0: ("1", "crm")}  # nothing replaced it


def test_a_verified_label_replaces_an_unverified_one(registered, settings, store_url, crm_token):
    """An open client labelling first cannot block the verified source's label."""
    open_settings = settings.model_copy(update={"feedback_auth": "none"})
    registered.set_champion("1")
    with ThreadedService(registered.config, open_settings) as service:
        request_id = predict(service, registered)
        assert service.client.post("/feedback", json=label(request_id, 0, 0)).status_code == 200
        replaced = service.client.post("/feedback", json=label(request_id, 0, 1), headers=crm_token)
        assert replaced.status_code == 200 and replaced.json()["corrected"] == 1, replaced.text
        again = service.client.post("/feedback", json=label(request_id, 0, 1), headers=crm_token)
        assert again.json()["duplicates"] == 1  # the sender's own label: idempotent
    assert stored(store_url, request_id) == {0: ("1", "crm")}


def test_a_label_table_made_before_sources_is_migrated_and_its_rows_are_unverified(tmp_path):
    """Both back ends: the table as the previous release created it, with a row."""
    _check_migration(f"sqlite:///{tmp_path / 'old.db'}")
    with sqlite3.connect(tmp_path / "old.db") as connection:
        columns = [r[1] for r in connection.execute(f"PRAGMA table_info({LABELS_TABLE})")]
    assert columns[-1] == "source"
    for url in _postgres_database():
        _check_migration(url)


def _check_migration(url: str) -> None:
    SqlSampleStore(url).close()
    engine = create_store_engine(url)
    with engine.begin() as connection:
        connection.execute(
            text(
                f"CREATE TABLE {LABELS_TABLE} (request_id VARCHAR(128) NOT NULL, "
                "record_index INTEGER NOT NULL, model_name VARCHAR(256) NOT NULL, "
                "model_version VARCHAR(64) NOT NULL, ts_us BIGINT NOT NULL, "
                "label TEXT NOT NULL, value FLOAT NOT NULL, received_us BIGINT NOT NULL, "
                "corrections INTEGER NOT NULL, PRIMARY KEY (request_id, record_index))"
            )
        )
        connection.execute(
            text(f"INSERT INTO {LABELS_TABLE} VALUES ('old', 0, 'm', '1', 1, '1', 1.0, 1, 0)")
        )
    engine.dispose()
    store = LabelStore(url)  # opening migrates
    try:
        assert store.stored_of([("old", 0)])[("old", 0)].source == "unverified", url
        # and the old row is still read by the windows, with its source
        window = store.labelled_window("1970-01-01", "1970-01-02")
        assert list(window.columns)[-1] == "source"
    finally:
        store.close()
    reopened = LabelStore(url)  # a second opening finds the column: nothing to do
    reopened.close()


def test_two_sources_sharing_one_token_refuse_to_start(monkeypatch):
    """One token for two names would store a guessed source with every label."""
    from driftgate.core.yamlconfig import ConfigError
    from driftgate.serving.state import label_tokens

    monkeypatch.setenv("DRIFTGATE_TEST_A", "same-token")
    monkeypatch.setenv("DRIFTGATE_TEST_B", "same-token")
    settings = ServingSettings(label_sources={"a": "DRIFTGATE_TEST_A", "b": "DRIFTGATE_TEST_B"})
    with pytest.raises(ConfigError, match=r"serving\.label_sources: a, b share one token"):
        label_tokens(settings, "admin-token")
