"""The sample store goes away under the running service, then comes back.

The service writes samples to a real PostgreSQL database through a TCP relay
(:class:`tests.faultproxy.TcpRelay`) that the test cuts. With
``on_store_failure=fail_closed`` (the default) a request that cannot be recorded is
refused with a 503 saying so; with ``answer_unlogged`` it is answered with
``sample_stored: false`` (body, header, metric). Either way nothing is acknowledged
as stored that is not, and once the store is back (the service's store watch sees it
within a second), requests are stored again.
"""

from __future__ import annotations

import pytest

from driftgate.config.serving import ServingSettings
from driftgate.stores.samples import SqlSampleStore
from tests.driftgate.stores.conftest import _postgres_database
from tests.faultproxy import TcpRelay
from tests.serving.conftest import ThreadedService, records_of, wait_for


@pytest.fixture
def postgres_url():
    yield from _postgres_database()


def stored_count(url: str) -> int:
    store = SqlSampleStore(url)
    try:
        return len(store.read_window("2000-01-01", "2100-01-01"))
    finally:
        store.close()


@pytest.mark.parametrize("mode", ["fail_closed", "answer_unlogged"])
def test_a_store_outage_is_refused_or_answered_unlogged_as_configured(
    registered, tmp_path, postgres_url, mode
):
    from sqlalchemy.engine import make_url

    direct = make_url(postgres_url)
    relay = TcpRelay(direct.host or "127.0.0.1", direct.port or 5432)
    relayed = direct.set(host="127.0.0.1", port=relay.port).render_as_string(hide_password=False)
    settings = ServingSettings(
        sample_store_url=relayed,
        control_store_url=f"sqlite:///{tmp_path / 'control.db'}",
        on_store_failure=mode,
    )
    registered.set_champion("1")
    record = {"records": records_of(registered.rows, 0, 1)}
    try:
        with ThreadedService(registered.config, settings) as service:
            before = service.client.post("/predict", json=record)
            assert before.status_code == 200 and before.json()["sample_stored"] is True
            assert stored_count(postgres_url) == 1

            relay.cut()
            during = service.client.post("/predict", json=record)
            if mode == "fail_closed":
                assert during.status_code == 503
                assert "sample store unavailable" in during.json()["detail"]
                assert "on_store_failure=fail_closed" in during.json()["detail"]
            else:
                assert during.status_code == 200
                assert during.json()["sample_stored"] is False
                assert during.headers["X-Driftgate-Sample-Stored"] == "false"
                assert len(during.json()["probabilities"]) == 1
                metrics = service.client.get("/metrics").text
                assert "driftgate_unstored_records_total 1.0" in metrics

            relay.restore()
            # The service learns that the store is back from its store watch, which probes
            # it every second (serving/storewatch.py): until then it answers as during
            # the outage, without trying the store.
            wait_for(
                lambda: service.client.get("/readyz").status_code == 200,
                what="the service to see the store back",
            )
            after = service.client.post("/predict", json=record)
            assert after.status_code == 200 and after.json()["sample_stored"] is True
            # Exactly the requests answered as stored are in the store.
            assert stored_count(postgres_url) == 2
    finally:
        relay.close()
