"""One client cannot pause inference for everyone (issue 28, item 4).

Real uvicorn over HTTP, real SQLite and PostgreSQL stores, the real drift check. Clients
are told apart by their peer address (each client's connections bound to its own
loopback address, 127.0.0.2 and up) or by ``serving.client_id_header``. A
``missing_share`` monitor whose action is ``pause_inference`` pauses when many clients
send nulls; when one client sends them all, the drift check opens a review naming that
client instead. Before the fix the first case paused the whole service.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest
from sqlalchemy import text

from driftgate.stores.control import ControlStore
from driftgate.stores.reviews import ReviewStore
from driftgate.stores.samples import SqlSampleStore
from tests.serving.conftest import REPO_ROOT, ThreadedService, records_of

CONTRACT = REPO_ROOT / "data_contracts" / "rainfall.yaml"
CLEAN_CLIENTS = 4


def _settings(sample_url: str, folder: Path, **overrides):
    from driftgate.config.serving import ServingSettings

    return ServingSettings(
        sample_store_url=sample_url,
        control_store_url=f"sqlite:///{folder / 'control.db'}",
        # The demo contract lets a single record carry a null (a sensor gap).
        contract=str(CONTRACT),
        pause_poll_seconds=0,
        **overrides,
    )


def _send(service, registered, who, offset, nulls, header, requests=30, size=2):
    """``requests`` requests of ``size`` records from one client; with ``nulls``, the
    first record of each request has temperature null (one null per request)."""
    transport = None if header else httpx.HTTPTransport(local_address=who)
    with httpx.Client(base_url=service.url, transport=transport, timeout=30) as client:
        for r in range(requests):
            # The proxy appends who; the entry before it is the client's own, a new one
            # each time: were it read, one client would pass as sixty.
            headers = {header: f"198.51.100.{r}, {who}"} if header else {}
            records = records_of(registered.rows, (offset + r * size) % 900, size)
            if nulls:
                records[0]["temperature"] = None
            answer = client.post("/predict", json={"records": records}, headers=headers)
            assert answer.status_code == 200, answer.text
            assert answer.json()["sample_stored"] is True


def _judge(registered, settings):
    from driftgate.gates.config import load_gate_config
    from driftgate.jobs import drift_check as job
    from driftgate.monitors.rules import Monitor

    config = registered.config.model_copy(deep=True)
    config.serving = settings
    monitor = Monitor(
        name="missing-values", metric="missing_share", threshold=0.05,
        schedule="0 * * * *", window="1h", action="pause_inference",
    )  # fmt: skip
    gates = load_gate_config().model_copy(update={"monitors": [monitor]})
    now = datetime.now(UTC)
    return job.judge_window(config, gates, now - timedelta(minutes=30), now + timedelta(minutes=1))


def _paused(settings, registered) -> bool:
    control = ControlStore(settings.control_store_url)
    try:
        return control.state(registered.config.model.name).paused
    finally:
        control.close()


def _clients(how: str, count: int) -> list[str]:
    # Peers: loopback addresses the kernel routes to 127.0.0.1's listener; header
    # values: documentation addresses (RFC 5737), all sent from 127.0.0.1.
    return [f"127.0.0.{i + 2}" if how == "peer" else f"192.0.2.{i + 2}" for i in range(count)]


@pytest.mark.parametrize("how", ["peer", "header"])
@pytest.mark.parametrize("sample_url", ["sqlite", "postgresql"], indirect=True)
def test_one_client_sending_nulls_opens_a_review_instead_of_pausing(
    registered, tmp_path, sample_url, how
):
    header = "X-Forwarded-For" if how == "header" else None
    settings = _settings(sample_url, tmp_path, client_id_header=header)
    culprit, *clean = _clients(how, 1 + CLEAN_CLIENTS)
    with ThreadedService(registered.config, settings) as service:
        # One null per request, in 60 one-record requests: 60 of 300 rows (20% > 5%).
        _send(service, registered, culprit, 0, True, header, requests=60, size=1)
        for i, who in enumerate(clean):
            _send(service, registered, who, 100 * (i + 1), False, header)
        key = service.state.sampling.client_key(culprit)
        verdict = _judge(registered, settings)
        (result,) = verdict.results
        assert result.breached and result.breached_features == ["temperature"], result
        assert result.action == "open_review"
        expected = f"client {key} sent 60 of 60 missing values in temperature"
        assert result.details["concentration"].startswith(expected), result.details
        (taken,) = verdict.actions
        assert taken.action == "open_review" and taken.changed, taken
        # Not paused: the service still answers everyone, the culprit included.
        assert not _paused(settings, registered)
        answer = service.client.post(
            "/predict", json={"records": records_of(registered.rows, 0, 1)}
        )
        assert answer.status_code == 200, answer.text
    reviews = ReviewStore(settings.control_store_url)
    try:
        (review,) = reviews.list(model_name=registered.config.model.name)
        assert any(e.startswith(expected) for e in review.evidence), review.evidence
    finally:
        reviews.close()
    store = SqlSampleStore(sample_url)
    try:
        tallies = store.missing_by_client(
            datetime.now(UTC) - timedelta(hours=1), datetime.now(UTC) + timedelta(minutes=1),
            ["temperature"],
        )  # fmt: skip
        # Six clients (the five, and 127.0.0.1's request after the check), each by its
        # key, never its address; the culprit's 60 rows.
        assert len(tallies) == 2 + CLEAN_CLIENTS and tallies[key].rows == 60
        addresses = ["127.0.0.1", *_clients(how, 1 + CLEAN_CLIENTS)]
        assert all(len(c) == 16 and c not in addresses for c in tallies)
    finally:
        store.close()
    if sample_url.startswith("sqlite"):
        stored = b"".join(p.read_bytes() for p in tmp_path.glob("samples.db*"))
        assert culprit.encode() not in stored  # the address itself is never stored


@pytest.mark.parametrize("sample_url", ["sqlite", "postgresql"], indirect=True)
def test_many_clients_sending_nulls_still_pause(registered, tmp_path, sample_url):
    """The control: every client sends a null in every request; without any one of
    them the breach holds, so the service pauses as before."""
    settings = _settings(sample_url, tmp_path)
    with ThreadedService(registered.config, settings) as service:
        for i, who in enumerate(_clients("peer", 5)):
            _send(service, registered, who, 100 * i, True, None)  # 50% missing each
        verdict = _judge(registered, settings)
        (result,) = verdict.results
        assert result.breached and result.action == "pause_inference", result
        assert "concentration" not in result.details
        (taken,) = verdict.actions
        assert taken.action == "pause_inference" and taken.changed, taken
        assert _paused(settings, registered)
        answer = service.client.post(
            "/predict", json={"records": records_of(registered.rows, 0, 1)}
        )
        assert answer.status_code == 503 and answer.json()["paused"] is True, answer.text


@pytest.mark.parametrize("sample_url", ["sqlite"], indirect=True)
def test_a_refused_record_carries_its_clients_key(registered, tmp_path, sample_url):
    settings = _settings(sample_url, tmp_path)
    with ThreadedService(registered.config, settings) as service:
        record = records_of(registered.rows, 0, 1)[0]
        record["temperature"] = 99.0  # past the contract's max: 422, stored as rejected
        transport = httpx.HTTPTransport(local_address="127.0.0.7")
        with httpx.Client(base_url=service.url, transport=transport, timeout=30) as client:
            answer = client.post("/predict", json={"records": [record]})
        assert answer.status_code == 422 and answer.json()["sample_stored"] is True, answer.text
        key = service.state.sampling.client_key("127.0.0.7")
    store = SqlSampleStore(sample_url)
    try:
        with store.engine.connect() as connection:
            stored = connection.execute(text("SELECT client FROM driftgate_rejected")).scalars()
            assert list(stored) == [key]
    finally:
        store.close()
