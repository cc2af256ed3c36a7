"""Rejected traffic through the drift-check job (issue 16): the demo's production days
are replayed over real HTTP into a real service; from 1981 the contract refuses
sea-level pressures out of its range (6.8% of 1981's days, 0% in 1978), and the
``rejected_share`` monitors fire on 1981 and stay quiet on 1978 — on SQLite and
PostgreSQL. Drift on ``population: all`` sees the refused values too. A paused month
of 1983 is answered 503: ``error_share`` fires on it, as does a ``latency_p95`` rule
no real request can meet."""

from __future__ import annotations

import math

import pytest
from scipy import stats

from driftgate import registry
from driftgate.config.serving import ServingSettings
from driftgate.gates.config import load_gate_config
from driftgate.jobs import drift_check as job
from driftgate.jobs.contract_revision import PROPOSAL_PREFIX
from driftgate.monitors.rules import Monitor
from driftgate.stores.factories import review_store
from tests.conftest import mlflow_client
from tests.driftgate.stores.conftest import _postgres_database
from tests.serving.conftest import ThreadedService, admin_headers, wait_for

CALM = ("1978-01-01", "1979-01-01")
SHIFTED = ("1981-01-01", "1982-01-01")
OUTAGE = ("1983-01-01", "1983-02-01")  # paused for most of its requests
PAUSED_REQUESTS, SERVED_REQUESTS = 40, 20
YEARLY = {"schedule": "0 0 1 1 *", "window": "365d", "action": "open_review"}


def monitor(name: str, metric: str, threshold: float, **extra) -> Monitor:
    return Monitor(name=name, metric=metric, threshold=threshold, **YEARLY, **extra)


MONITORS = [
    monitor("rejected", "rejected_share", 0.02),
    monitor("rejected-pressure", "rejected_share", 0.02, features=["sea_level_pressure"]),
    monitor("rejected-range", "rejected_share:range", 0.02),
    monitor("rejected-dtype", "rejected_share:dtype", 0.02),
    monitor("ks-accepted", "ks", 0.05, features=["sea_level_pressure"]),
    monitor("ks-all", "ks", 0.05, features=["sea_level_pressure"], population="all"),
    monitor("latency", "latency_p95", 2.0),
    monitor("errors", "error_share", 0.01),
]


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def replayed(request, trained_model, tmp_path_factory):
    """One replay per back end, shared by the module's tests (they only read it)."""
    tmp_path = tmp_path_factory.mktemp(f"replay-{request.param}")
    if request.param == "sqlite":
        sample_url = f"sqlite:///{tmp_path / 'samples.db'}"
        yield from _replay(trained_model, tmp_path, sample_url)
    else:
        for sample_url in _postgres_database():
            yield from _replay(trained_model, tmp_path, sample_url)


def _replay(trained_model, tmp_path, sample_url):
    config = trained_model.config.model_copy(deep=True)
    config.home = str(tmp_path / "home")
    config.serving = config.serving.model_copy(
        update={
            "sample_store_url": sample_url,
            "control_store_url": f"sqlite:///{tmp_path / 'control.db'}",
            "accept_client_timestamps": True,
        }
    )
    version = trained_model.outcome.registered.version
    mlflow_client(config.tracking.uri).set_registered_model_alias(
        config.model.name, registry.CHAMPION_ALIAS, version
    )
    data = trained_model.data
    production = data.splits.production
    statuses = {}
    with ThreadedService(config, ServingSettings(**config.serving.model_dump())) as service:
        for start, end in (CALM, SHIFTED):
            days = production[(production["date"] >= start) & (production["date"] < end)]
            for _, row in days.iterrows():
                record = {
                    f: None if math.isnan(float(row[f])) else float(row[f]) for f in data.features
                }
                answer = service.client.post(
                    "/predict",
                    json={"timestamp": row["date"].isoformat() + "Z", "records": [record]},
                )
                statuses[answer.status_code] = statuses.get(answer.status_code, 0) + 1
        _outage(service, data, statuses)
    yield config, statuses, data


def _outage(service, data, statuses) -> None:
    """OUTAGE over HTTP: PAUSED_REQUESTS answered 503 while paused, then SERVED_REQUESTS
    once resumed (the probes that wait for the switch are counted too)."""
    client = service.client
    record = {f: float(data.splits.train[f].median()) for f in data.features}

    def post(day: int) -> int:
        body = {"timestamp": f"1983-01-{day:02d}T12:00:00Z", "records": [record]}
        status = client.post("/predict", json=body).status_code
        statuses[("outage", status)] = statuses.get(("outage", status), 0) + 1
        return status

    headers = admin_headers()
    assert client.post("/admin/pause", json={"reason": "drill"}, headers=headers).status_code == 200
    wait_for(lambda: post(1) == 503, what="the pause")
    for i in range(PAUSED_REQUESTS):
        assert post(2 + i % 20) == 503
    assert (
        client.post("/admin/resume", json={"reason": "drill"}, headers=headers).status_code == 200
    )
    wait_for(lambda: post(25) == 200, what="the resume")
    for _ in range(SERVED_REQUESTS):
        assert post(26) == 200


def test_rejected_share_fires_where_the_contract_refuses_the_shifted_pressure(replayed):
    config, statuses, data = replayed
    assert statuses.get(422, 0) >= 20 and statuses.get(200, 0) >= 600, statuses
    gates = load_gate_config()
    calm = job.judge_window(config, gates, *CALM, monitors=MONITORS)
    shifted = job.judge_window(config, gates, *SHIFTED, monitors=MONITORS)
    by_name = {r.monitor: r for r in shifted.results}
    assert calm.breached == [], calm.markdown()
    assert {r.monitor: r.status for r in calm.results}["rejected"] == "ok"

    rejected = by_name["rejected"]
    assert rejected.breached and rejected.observed == pytest.approx(25 / 365, abs=0.01)
    assert rejected.p_value < rejected.level
    assert by_name["rejected-pressure"].breached_features == ["sea_level_pressure"]
    assert by_name["rejected-range"].breached
    assert not by_name["rejected-dtype"].breached  # no text sent for a number
    assert not by_name["latency"].breached and by_name["latency"].status == "ok"
    assert not by_name["errors"].breached and by_name["errors"].observed == 0.0
    # population: all judges every received record, the refused pressures included
    # (they lie in both tails, so KS on all is not larger here: the refusals are the
    # evidence, and the rejected_share monitors carry it).
    production, reference = data.splits.production, data.splits.train["sea_level_pressure"]
    year = production[production["date"].dt.year == 1981]["sea_level_pressure"].dropna()
    accepted = year[(year >= -0.86) & (year <= 0.81)]
    assert len(accepted) < len(year)
    for name, values in (("ks-all", year), ("ks-accepted", accepted)):
        expected = stats.ks_2samp(reference.dropna(), values).pvalue
        assert by_name[name].observed == pytest.approx(expected, rel=1e-6), name
    assert {"rejected", "rejected-pressure", "rejected-range"} <= set(shifted.breached)
    assert [a.monitor for a in shifted.actions if a.action == "open_review"]
    # Each refused-traffic review carries the contract revision the window asks for
    # (issue 29): both pressure bounds, since the refused pressures lie in both tails.
    taken = {a.monitor: a for a in shifted.actions}
    assert "contract revision proposed" in taken["rejected"].detail
    reviews = review_store(config)
    try:
        evidence = reviews.get(taken["rejected"].review_id).evidence
    finally:
        reviews.close()
    (head,) = [item for item in evidence if item.startswith(PROPOSAL_PREFIX)]
    assert "contract 'rainfall' v1 -> v2" in head
    changed = {item.split(":")[0].strip() for item in evidence if item.startswith("  columns.")}
    assert changed == {"columns.sea_level_pressure.min", "columns.sea_level_pressure.max"}


def test_error_share_and_latency_fire_on_a_paused_month_served_over_http(replayed):
    config, statuses, _ = replayed
    errors = statuses[("outage", 503)]
    requests = errors + statuses[("outage", 200)]
    assert errors >= PAUSED_REQUESTS and requests >= PAUSED_REQUESTS + SERVED_REQUESTS
    strict = monitor("latency-strict", "latency_p95", 1e-6)  # no request is that fast
    rules = [monitor("errors", "error_share", 0.01), monitor("latency", "latency_p95", 2.0), strict]
    outage = job.judge_window(config, load_gate_config(), *OUTAGE, monitors=rules)
    by_name = {r.monitor: r for r in outage.results}
    # Every request of the month is in the requests log (stored with the samples).
    assert by_name["errors"].observed == pytest.approx(errors / requests)
    assert by_name["errors"].breached and by_name["errors"].p_value < by_name["errors"].level
    assert by_name["latency-strict"].breached and not by_name["latency"].breached
    assert set(outage.breached) == {"errors", "latency-strict"}
