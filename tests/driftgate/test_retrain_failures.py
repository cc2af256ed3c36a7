"""A retrain that fails says why in one line, on its record and its review, never a
traceback (issue 29): through the retrain job's launcher (``run_locally``, what the
drift check runs in process) and its journey (``run_retrain``), on real sample, label,
retrain and review stores (SQLite), real Great Expectations and real torch.

Both failures here happen before anything is registered, so no model is trained to
the end: a window whose labelled records break the contract (refused at
``prepare-data``), and a model factory whose module does not fit the features
(refused at ``fit-model``)."""

from __future__ import annotations

import logging
from datetime import timedelta

import numpy as np
import pandas as pd
import pytest
from torch import nn

from driftgate.jobs.data import prepare_data
from driftgate.jobs.retrain import run_locally, run_retrain
from driftgate.stores.factories import retrain_store, review_store
from driftgate.stores.retrains import FAILED
from driftgate.stores.samples import SqlSampleStore
from driftgate.training.flavour import ModelOutputError
from tests.driftgate.test_performance_monitor import label, write_window

WINDOW = ("2042-02-01", "2042-02-02")
ROWS = 40


def wrong_width(features, params):
    """A user's model factory with a mistake: its first layer takes 3 inputs, the
    project has 8 features."""
    return nn.Sequential(nn.Linear(3, 1))


@pytest.fixture
def project(project_config, tmp_path):
    """The project with its own home (retrain, review and label stores) and a window of
    40 served records of the configured test split, 30 of them labelled; a review open
    for the breach and a retrain claimed for it."""
    config = project_config.model_copy(deep=True)
    config.home = str(tmp_path / "home")
    url = f"sqlite:///{tmp_path / 'samples.db'}"
    config.serving = config.serving.model_copy(update={"sample_store_url": url})
    data = prepare_data(config, validate_contract=False)
    return {"config": config, "url": url, "data": data, "rows": data.splits.test.iloc[:ROWS]}


def serve_and_claim(project, rows) -> tuple:
    """Write ``rows`` as the window's served records, label 30, open a review and claim
    a retrain for the breach; returns (retrain, review id)."""
    config, url = project["config"], project["url"]
    store = SqlSampleStore(url)
    features = list(project["data"].features)
    write_window(store, rows, np.full(len(rows), 0.7), WINDOW, "1", "rf", features)
    store.close()
    label(url, WINDOW, rows["rain"].to_numpy(), "rf", range(30))
    reviews = review_store(config)
    try:
        review = reviews.open_or_update(
            model_name=config.model.name, model_version="1", monitor="mean-shift-kl",
            metric="kl", window_start=WINDOW[0], window_end=WINDOW[1], observed=0.4,
            threshold=0.1,
        ).review  # fmt: skip
    finally:
        reviews.close()
    retrains = retrain_store(config)
    try:
        claim = retrains.claim(
            model_name=config.model.name, champion_version="1", monitor="mean-shift-kl",
            window_start=WINDOW[0], window_end=WINDOW[1], review_id=review.id,
            lease=timedelta(hours=1),
        )  # fmt: skip
    finally:
        retrains.close()
    assert claim.started
    return claim.retrain, review.id


def evidence_of(config, review_id: str) -> list[str]:
    reviews = review_store(config)
    try:
        return reviews.get(review_id).evidence
    finally:
        reviews.close()


def assert_one_line_without_traceback(caplog, retrain, line_start: str) -> None:
    assert retrain.status == FAILED
    assert retrain.detail.startswith(line_start), retrain.detail
    assert "\n" not in retrain.detail and "Traceback" not in retrain.detail
    shown = [r for r in caplog.records if r.levelno >= logging.INFO]
    assert not [r for r in shown if r.exc_info], "a traceback was logged"
    assert any(retrain.detail in r.getMessage() for r in shown)  # the log says it too


def test_a_window_breaking_the_contract_fails_the_retrain_in_one_line(project, caplog):
    """The launcher the drift check runs in process: the retrain ends ``failed`` with
    the contract's rule in one line, on the retrain and the review; nothing raised."""
    rows = project["rows"].copy()
    # Records the service accepted under a wider range than the contract's now (max
    # 2.99 for temperature): the retrain's data breaks the contract.
    rows["temperature"] = 4.5
    retrain, review_id = serve_and_claim(project, rows)
    caplog.set_level(logging.INFO)
    ended = run_locally(project["config"], retrain)
    assert_one_line_without_traceback(caplog, ended, "prepare-data failed: ContractBreach: ")
    assert "temperature" in ended.detail and "data breaks contract" in ended.detail
    assert ended.outcome in evidence_of(project["config"], review_id)


def test_a_model_that_does_not_fit_the_features_fails_the_retrain_in_one_line(project, caplog):
    """The retrain's journey: a training error is recorded as one line naming the
    training step, then raised as it came (the train flow's run fails with it)."""
    config = project["config"]
    config.model = config.model.model_copy(
        update={"factory": "tests.driftgate.test_retrain_failures:wrong_width"}
    )
    retrain, review_id = serve_and_claim(project, project["rows"])
    caplog.set_level(logging.INFO)
    with pytest.raises(ModelOutputError) as raised:
        run_retrain(config, retrain.id)
    ended = retrain_store_get(config, retrain.id)
    assert ended.detail == f"fit-model failed: ModelOutputError: {raised.value}"
    assert ended.detail.startswith("fit-model failed: "), ended.detail
    assert "shapes cannot be multiplied" in ended.detail
    assert "\n" not in ended.detail and ended.outcome in evidence_of(config, review_id)
    assert not [r for r in caplog.records if r.exc_info and r.levelno >= logging.INFO]


def retrain_store_get(config, retrain_id: str):
    store = retrain_store(config)
    try:
        return store.get(retrain_id)
    finally:
        store.close()


def test_a_launcher_that_fails_before_the_journey_leaves_one_line(project, caplog):
    """Where the retrain runs failed before it ran (a Prefect server refusing the run):
    the drift check's retrain port records the launch's line and goes on."""
    from driftgate.jobs.retrain import start_retrain
    from driftgate.monitors.rules import RetrainSettings
    from tests.monitors.actions.conftest import request

    def refused(config, retrain):
        raise RuntimeError("server refused the run\n(HTTP 409: deployment paused)")

    caplog.set_level(logging.INFO)
    breach = request(window=tuple(pd.Timestamp(t, tz="UTC") for t in WINDOW), action="retrain")
    started = start_retrain(project["config"], breach, None, RetrainSettings(), refused)
    store = retrain_store(project["config"])
    try:
        (retrain,) = store.list(breach.model_name)
    finally:
        store.close()
    assert started.started and retrain.outcome in started.detail
    assert_one_line_without_traceback(
        caplog,
        retrain,
        "launch failed: RuntimeError: server refused the run; (HTTP 409: deployment paused)",
    )
