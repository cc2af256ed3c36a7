"""The running service (real uvicorn, real HTTP) never loads a hostile champion.

The reported attack (a cloudpickled pyfunc beside a fake ``pytorch`` flavour entry and
a genuine ``model.pt2``) is registered as a version of its own model, next to a
genuine copy of the session's v1, and set as ``champion``. MLflow's own pickle switch
is on, as on Databricks runtimes: without driftgate's allow-list the payload would run
in the service's process within one poll.
"""

from __future__ import annotations

import logging
import time

import numpy as np
import pytest

from driftgate.config import ModelSettings
from driftgate.config.serving import ServingSettings
from tests import hostile_models as hostile
from tests.serving.conftest import ThreadedService, records_of, wait_for

MODEL = "served-hostile"
POLL_SECONDS = 0.3


@pytest.fixture(autouse=True)
def _mlflow_would_unpickle(monkeypatch):
    monkeypatch.setenv("MLFLOW_ALLOW_PICKLE_DESERIALIZATION", "true")


@pytest.fixture(scope="module")
def variants(registered, tmp_path_factory):
    return hostile.Variants.of(
        registered.config.tracking,
        registered.config.model.name,
        "1",
        MODEL,
        tmp_path_factory.mktemp("hostile-served"),
    )


@pytest.fixture(scope="module")
def config(registered):
    return registered.config.model_copy(update={"model": ModelSettings(name=MODEL)})


@pytest.fixture
def settings(tmp_path) -> ServingSettings:
    return ServingSettings(
        sample_store_url=f"sqlite:///{tmp_path / 'samples.db'}",
        control_store_url=f"sqlite:///{tmp_path / 'control.db'}",
        model_poll_seconds=POLL_SECONDS,
        pause_poll_seconds=POLL_SECONDS,
    )


def test_a_hostile_champion_is_refused_and_the_old_one_keeps_serving(
    registered, variants, config, settings, tmp_path, caplog
):
    marker = tmp_path / "payload-ran"
    genuine = variants.register()
    attack = variants.register(hostile.cloudpickled_pyfunc(marker))
    variants.set_alias("champion", genuine)
    records = records_of(registered.rows, 0, 10)
    with caplog.at_level(logging.ERROR), ThreadedService(config, settings) as service:
        wait_for(
            lambda: service.client.get("/readyz").json()["model_version"] == genuine,
            timeout=60,
            what=f"v{genuine} to load",
        )
        variants.set_alias("champion", attack)
        wait_for(
            lambda: (
                'driftgate_model_reloads_total{outcome="failed"} 1.0'
                in service.client.get("/metrics").text
            ),
            timeout=30,
            what="the hostile version to be tried",
        )
        time.sleep(3 * POLL_SECONDS)  # further polls must not try it again, nor load it

        response = service.client.post("/predict", json={"records": records})
        assert response.status_code == 200, response.text
        assert response.json()["model_version"] == genuine
        np.testing.assert_allclose(
            response.json()["probabilities"], registered.expected("1", records), rtol=1e-5
        )
        ready = service.client.get("/readyz")
        assert ready.status_code == 200 and ready.json()["model_version"] == genuine
        reason = ready.json()["champion_error"]  # an operator sees why the alias is ignored
        assert reason == service.state.champion.last_error
        assert f"models:/{MODEL}/{attack}: refusing to load a pickled model" in reason
        assert "python_model.pkl: a pickle stream" in reason
        metrics = service.client.get("/metrics").text
        assert 'driftgate_model_reloads_total{outcome="failed"} 1.0' in metrics
    assert not marker.exists(), "the payload ran in the service"
    logged = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert any(f"cannot load {MODEL} v{attack}" in m and "python_model" in m for m in logged)


@pytest.mark.parametrize(
    "shape, reason",
    [
        (hostile.cloudpickled_pyfunc, "loader_module: 'mlflow.pyfunc.model'"),
        # Failed before (issue 28, 1): the guards ran on every /predict, the expression
        # at load; the graph was only checked for being JSON.
        (hostile.guards_code_payload, "models/model.json: $.guards_code: guards are code"),
        (hostile.expr_str_payload, "as_expr.expr_str: character '+'"),
    ],
    ids=["cloudpickle", "pt2-guards_code", "pt2-expr_str"],
)
def test_a_service_started_on_a_hostile_champion_is_not_ready_and_says_why(
    registered, variants, config, settings, tmp_path, shape, reason
):
    marker = tmp_path / "payload-ran"
    attack = variants.register(shape(marker))
    variants.set_alias("champion", attack)
    records = records_of(registered.rows, 0, 3)
    with ThreadedService(config, settings) as service:
        ready = wait_for(
            lambda: (r := service.client.get("/readyz")).json()["problems"] and r,
            timeout=60,
            what="a readiness verdict",
        )
        assert ready.status_code == 503
        (problem,) = [p for p in ready.json()["problems"] if "refusing" in p]
        assert f"models:/{MODEL}/{attack}: refusing to load" in problem
        assert reason in problem
        assert ready.json()["model_version"] is None
        assert service.client.post("/predict", json={"records": records}).status_code == 503

        genuine = variants.register()
        variants.set_alias("champion", genuine)  # the way out: a version that passes
        wait_for(
            lambda: service.client.get("/readyz").status_code == 200,
            timeout=30,
            what=f"v{genuine} to load",
        )
        assert service.client.post("/predict", json={"records": records}).status_code == 200
    assert not marker.exists(), "the payload ran in the service"
