"""``performance:<metric>`` monitors in the drift-check job, on real stores (SQLite and
PostgreSQL sample stores) and a real MLflow store: a window whose labels show a real
drop breaches and opens a review, one whose labels match the gate-time test metric
does not, too few labels are insufficient_data, and a window judged before its labels
arrived is judged again when they do (and acted on once)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from driftgate import registry
from driftgate.gates.config import load_gate_config
from driftgate.jobs import drift_check as job
from driftgate.jobs import window_plan
from driftgate.jobs.feedback import LabelInput, submit_labels
from driftgate.monitors.rules import Monitor
from driftgate.stores.labels import LabelStore
from driftgate.stores.samples import Sample, SqlSampleStore
from driftgate.training.data import feature_matrix
from driftgate.training.model import predict_proba
from tests.conftest import mlflow_client
from tests.driftgate.stores.conftest import _postgres_database

GOOD = ("2040-01-01", "2040-01-02")
BAD = ("2040-01-02", "2040-01-03")
LATE = ("2040-01-03", "2040-01-04")  # labels arrive after it was judged
AFTER = ("2040-01-04", "2040-01-05")
ROWS = 600


def _monitor(**changes) -> Monitor:
    settings = {
        "name": "auc-drop",
        "metric": "performance:roc_auc",
        "threshold": 0.05,
        "schedule": "0 0 * * *",
        "window": "1d",
        "action": "open_review",
        "min_labels": 100,
    }
    return Monitor(**{**settings, **changes})


def write_window(store, rows, probabilities, window, version, prefix, features):
    start = pd.Timestamp(window[0], tz="UTC")
    step = pd.Timedelta(days=1) / len(rows)
    records = rows[features].to_dict("records")
    store.append(
        [
            Sample(
                timestamp=start + i * step, request_id=f"{prefix}-{window[0]}-{i}",
                record_index=0, model_name="rainfall-classifier", model_version=version,
                features={k: float(v) for k, v in records[i].items()},
                prediction=float(p), predicted_class=int(p >= 0.5),
            )
            for i, p in enumerate(probabilities)
        ]
    )  # fmt: skip


def label(url, window, truth, prefix, indexes, source="test-labels"):
    store = LabelStore(url)
    try:
        outcome = submit_labels(
            store,
            [LabelInput(i, f"{prefix}-{window[0]}-{i}", 0, int(truth[i])) for i in indexes],
            outputs_of=lambda name, version: ("binary", ()),
            horizon=None,
            source=source,
            all_or_nothing=False,
        )
    finally:
        store.close()
    assert outcome.counts()["accepted"] == len(indexes)


@pytest.fixture(params=["sqlite", "postgresql"])
def setup(request, trained_model, tmp_path):
    if request.param == "sqlite":
        urls = iter([f"sqlite:///{tmp_path / 'samples.db'}"])
    else:
        urls = _postgres_database()
    for url in urls:
        config = trained_model.config.model_copy(deep=True)
        config.serving = config.serving.model_copy(
            update={
                "sample_store_url": url,
                "control_store_url": f"sqlite:///{tmp_path / 'control.db'}",
            }
        )
        config.home = str(tmp_path / "home")
        version = trained_model.outcome.registered.version
        mlflow_client(config.tracking.uri).set_registered_model_alias(
            config.model.name, registry.CHAMPION_ALIAS, version
        )
        test = trained_model.data.splits.test.iloc[:ROWS]
        probabilities = predict_proba(
            trained_model.result.model, feature_matrix(test, trained_model.data.features)
        )
        truth = test["rain"].to_numpy().astype(int)
        rng = np.random.default_rng(3)
        flipped = truth.copy()
        chosen = rng.random(len(truth)) < 0.3  # 30% of the labels contradict the model
        flipped[chosen] = 1 - flipped[chosen]
        store = SqlSampleStore(url)
        for window in (GOOD, BAD, LATE, AFTER):
            write_window(store, test, probabilities, window, version, request.param,
                         list(trained_model.data.features))  # fmt: skip
        store.close()
        gates = load_gate_config().model_copy(update={"monitors": [_monitor()]})
        yield {
            "config": config, "gates": gates, "url": url, "truth": truth,
            "flipped": flipped, "prefix": request.param, "version": version,
            "baseline": trained_model.metrics["test_roc_auc"],
        }  # fmt: skip


def open_reviews(config):
    store = job.review_store(config)
    try:
        return store.list(status="open")
    finally:
        store.close()


def test_a_real_drop_breaches_and_a_matching_window_does_not(setup):
    config, gates, url, prefix = setup["config"], setup["gates"], setup["url"], setup["prefix"]
    label(url, GOOD, setup["truth"], prefix, range(ROWS))
    label(url, BAD, setup["flipped"], prefix, range(ROWS))

    good = job.judge_window(config, gates, *GOOD)
    (result,) = good.results
    assert result.status == "ok" and not result.breached, result.reason
    assert result.labels == ROWS
    assert result.baseline == pytest.approx(setup["baseline"])
    low, high = result.ci
    assert low < result.realized < high
    assert good.actions == []
    assert f"on {ROWS} labels vs" in good.markdown()  # the report shows the figures

    bad = job.judge_window(config, gates, *BAD)
    (result,) = bad.results
    assert result.breached and result.status == "ok", result.reason
    assert result.observed > 0.15  # the drop in AUC
    assert result.p_value < result.level
    assert [a.action for a in bad.actions] == ["open_review"]
    assert len(open_reviews(config)) == 1
    run = mlflow_client(config.tracking.uri).get_run(bad.run_id)
    assert run.data.metrics["monitor.auc-drop.labels"] == ROWS
    assert run.data.metrics["monitor.auc-drop.realized"] == pytest.approx(result.realized)


def test_a_window_judged_before_its_labels_is_judged_again_when_they_arrive(setup):
    config, gates, url, prefix = setup["config"], setup["gates"], setup["url"], setup["prefix"]
    label(url, LATE, setup["flipped"], prefix, range(20))  # a few labels so far
    first = job.judge_window(config, gates, *LATE)
    assert first.results[0].status == "insufficient_data"
    assert "20 labelled records < min_labels (100)" in first.results[0].reason
    assert first.actions == []
    # A later window is judged meanwhile: a drift monitor's state would now refuse LATE.
    job.judge_window(config, gates, *AFTER)
    end = pd.Timestamp(AFTER[1], tz="UTC")
    assert window_plan.plan_rejudgements(config, gates, end=end) == []  # no new labels yet

    label(url, LATE, setup["flipped"], prefix, range(20, ROWS))
    planned = window_plan.plan_recent(config, gates, end=end)
    again = [(a, b) for a, b, _ in planned]
    assert (pd.Timestamp(LATE[0], tz="UTC"), pd.Timestamp(LATE[1], tz="UTC")) in again
    verdict = job.judge_window(config, gates, *LATE)
    (result,) = verdict.results
    assert result.breached and result.labels == ROWS
    assert verdict.firings["auc-drop"].fire
    assert [a.changed for a in verdict.actions] == [True]
    assert len(open_reviews(config)) == 1
    # Judged with every label now: not planned again, and a rerun acts on nothing.
    assert window_plan.plan_rejudgements(config, gates, end=end) == []
    rerun = job.judge_window(config, gates, *LATE)
    assert [a.changed for a in rerun.actions] == [False]


def test_beyond_the_horizon_a_window_is_not_judged_again(setup):
    """The horizon runs on the wall clock from the labels' arrival (issue 30): labels
    that arrived more than serving.label_horizon ago are no reason to judge again."""
    config, gates, url, prefix = setup["config"], setup["gates"], setup["url"], setup["prefix"]
    label(url, LATE, setup["flipped"], prefix, range(20))
    job.judge_window(config, gates, *LATE)
    label(url, LATE, setup["flipped"], prefix, range(20, 200))
    soon = pd.Timestamp.now(tz="UTC") + pd.Timedelta(days=1)
    assert len(window_plan.plan_rejudgements(config, gates, now=soon)) == 1
    later = pd.Timestamp.now(tz="UTC") + pd.Timedelta(days=31)  # label_horizon 30d
    assert window_plan.plan_rejudgements(config, gates, now=later) == []


def test_a_replayed_window_a_year_old_is_judged_again_as_its_labels_arrive(setup, trained_model):
    """A replay logs records whose event times are a year old, today, and delivers their
    labels after them: the default 30d horizon, counted in event time back from the
    check's end, never judged such a window again (issue 30)."""
    config, gates, url, prefix = setup["config"], setup["gates"], setup["url"], setup["prefix"]
    day = (pd.Timestamp.now(tz="UTC") - pd.Timedelta(days=365)).floor("D")
    window = (day.strftime("%Y-%m-%d"), (day + pd.Timedelta(days=1)).strftime("%Y-%m-%d"))
    test = trained_model.data.splits.test.iloc[:ROWS]
    features = list(trained_model.data.features)
    probabilities = predict_proba(trained_model.result.model, feature_matrix(test, features))
    store = SqlSampleStore(url)
    try:
        write_window(store, test, probabilities, window, setup["version"], prefix, features)
    finally:
        store.close()
    assert config.serving.label_horizon == "30d"  # the default
    label(url, window, setup["flipped"], prefix, range(20))
    first = job.judge_window(config, gates, *window)
    assert first.results[0].status == "insufficient_data"
    label(url, window, setup["flipped"], prefix, range(20, ROWS))  # the labels arrive
    for end in (None, pd.Timestamp(window[1], tz="UTC")):  # now, or the replay's own time
        planned = window_plan.plan_rejudgements(config, gates, end=end)
        assert [(a, b) for a, b, _ in planned] == [
            (pd.Timestamp(window[0], tz="UTC"), pd.Timestamp(window[1], tz="UTC"))
        ]
    (result,) = job.judge_window(config, gates, *window).results
    assert result.breached and result.labels == ROWS
    assert window_plan.plan_rejudgements(config, gates) == []  # judged on every label now


def test_accuracy_is_realized_at_the_services_decision_threshold(setup, trained_model):
    """The service answers class 1 at ``serving.decision_threshold``; the realized
    accuracy of its answers is judged at the same threshold."""
    config, url, prefix = setup["config"], setup["url"], setup["prefix"]
    gates = setup["gates"].model_copy(
        update={"monitors": [_monitor(name="acc", metric="performance:accuracy", threshold=1.0)]}
    )
    test = trained_model.data.splits.test.iloc[:ROWS]
    p = predict_proba(trained_model.result.model, feature_matrix(test, trained_model.data.features))
    truth = setup["truth"]
    realized = {}
    for window, threshold in ((GOOD, 0.5), (AFTER, 0.8)):
        label(url, window, truth, prefix, range(ROWS))
        config.serving = config.serving.model_copy(update={"decision_threshold": threshold})
        (result,) = job.judge_window(config, gates, *window).results
        assert result.status == "ok", result.reason
        expected = float(np.mean((np.asarray(p) >= threshold) == (truth == 1)))
        assert result.realized == pytest.approx(expected)
        realized[threshold] = result.realized
    assert realized[0.5] != realized[0.8]
