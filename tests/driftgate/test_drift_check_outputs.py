"""The drift-check job judging the model's outputs (prediction_drift and
performance_estimate:<metric>) on a real sample store (SQLite and PostgreSQL), with the
real trained model's predictions and the reference profile the training job logged."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from driftgate import registry
from driftgate.gates.config import load_gate_config
from driftgate.jobs import drift_check as job
from driftgate.monitors.rules import Monitor
from driftgate.stores.samples import Sample, SqlSampleStore
from driftgate.training.flavour import flavour_of
from driftgate.training.inputs import model_inputs
from tests.conftest import mlflow_client
from tests.driftgate.stores.conftest import _postgres_database

CALM = ("2040-01-01", "2040-01-02")
UNSURE = ("2040-01-02", "2040-01-03")
DAILY = "0 0 * * *"


def write_window(store, frame, features, window, version, probabilities, threshold):
    start = pd.Timestamp(window[0], tz="UTC")
    step = pd.Timedelta(days=1) / len(frame)
    store.append(
        [
            Sample(
                timestamp=start + i * step,
                request_id=f"{window[0]}-{i}",
                record_index=0,
                model_name="rainfall-classifier",
                model_version=version,
                features={f: float(row[f]) for f in features},
                prediction=float(p),
                predicted_class=int(p >= threshold),
            )
            for i, ((_, row), p) in enumerate(zip(frame.iterrows(), probabilities, strict=True))
        ]
    )


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def monitored(request, trained_model, tmp_path_factory):
    folder = tmp_path_factory.mktemp(f"outputs-{request.param}")
    if request.param == "sqlite":
        urls = iter([f"sqlite:///{folder / 'samples.db'}"])
    else:
        urls = _postgres_database()
    url = next(urls)
    config = trained_model.config.model_copy(deep=True)
    config.serving = config.serving.model_copy(
        update={"sample_store_url": url, "control_store_url": url}
    )
    config.monitoring = config.monitoring.model_copy(update={"evidently_report": False})
    config.home = str(folder / "home")
    version = trained_model.outcome.registered.version
    mlflow_client(config.tracking.uri).set_registered_model_alias(
        config.model.name, registry.CHAMPION_ALIAS, version
    )
    data, spec = trained_model.data, trained_model.result.spec
    model = trained_model.result.model
    threshold = config.serving.decision_threshold
    pool = data.splits.validation
    probabilities = np.asarray(
        flavour_of(spec).predict(model, model_inputs(pool, spec.features)), dtype=float
    ).ravel()
    rng = np.random.default_rng(11)
    calm = rng.integers(0, len(pool), 800)  # a bootstrap of the reference outputs
    # Records the model is unsure of: a shift of the outputs towards 0.5 that should
    # both show as prediction drift and lower the estimated accuracy.
    unsure = np.flatnonzero(np.abs(probabilities - 0.5) < 0.15)
    unsure = rng.choice(unsure, 800)
    store = SqlSampleStore(url)
    for window, rows in ((CALM, calm), (UNSURE, unsure)):
        write_window(
            store,
            pool.iloc[rows],
            data.features,
            window,
            version,
            probabilities[rows],
            threshold,
        )
    store.close()
    gates = load_gate_config().model_copy(
        update={
            "monitors": [
                Monitor(
                    name="outputs-shift",
                    metric="prediction_drift",
                    threshold=0.05,
                    schedule=DAILY,
                    window="1d",
                    action="open_review",
                ),
                Monitor(
                    name="accuracy-estimate",
                    metric="performance_estimate:accuracy",
                    threshold=0.05,
                    schedule=DAILY,
                    window="1d",
                    action="open_review",
                ),
                Monitor(
                    name="auc-estimate",
                    metric="performance_estimate:roc_auc",
                    threshold=0.05,
                    schedule=DAILY,
                    window="1d",
                    action="open_review",
                ),
            ]
        }
    )
    yield {"config": config, "gates": gates, "version": version}
    for _ in urls:  # drops the PostgreSQL database
        pass


def by_name(verdict):
    return {r.monitor: r for r in verdict.results}


def test_the_training_job_logged_the_outputs_with_the_reference_profile(monitored, trained_model):
    profile = job.load_champion_profile(monitored["config"], monitored["version"])
    outputs = profile.outputs
    assert outputs is not None and outputs.task == "binary"
    assert outputs.columns == ["prediction", "predicted_class"]
    assert outputs.rows == len(trained_model.data.splits.validation)
    assert outputs.realized["accuracy"] == pytest.approx(trained_model.metrics["val_accuracy"])
    assert outputs.realized["roc_auc"] == pytest.approx(trained_model.metrics["val_roc_auc"])
    # In sample, the isotonic calibration reproduces the realized accuracy.
    assert outputs.estimated["accuracy"] == pytest.approx(outputs.realized["accuracy"], abs=0.01)


def test_a_window_like_the_reference_raises_nothing(monitored):
    verdict = job.judge_window(monitored["config"], monitored["gates"], *CALM)
    results = by_name(verdict)
    assert verdict.rows == 800 and verdict.breached == []
    assert {r.status for r in results.values()} == {"ok"}
    estimate = results["accuracy-estimate"].details
    assert abs(estimate["drop"]) < 3 * estimate["null_error"]


def test_unsure_outputs_are_prediction_drift_and_an_estimated_drop_with_evidence(monitored):
    verdict = job.judge_window(monitored["config"], monitored["gates"], *UNSURE)
    results = by_name(verdict)
    assert set(verdict.breached) == {"outputs-shift", "accuracy-estimate", "auc-estimate"}
    assert "prediction" in results["outputs-shift"].breached_features
    accuracy = results["accuracy-estimate"]
    assert accuracy.details["drop"] > 0.05 and accuracy.p_value <= accuracy.level
    assert {a.action for a in verdict.actions} == {"open_review"}
    reviews = job.review_store(monitored["config"])
    try:
        review = next(r for r in reviews.list(status="open") if r.monitor == "accuracy-estimate")
    finally:
        reviews.close()
    assert review.observed == pytest.approx(accuracy.observed)
    detail = next(a.detail for a in verdict.actions if a.monitor == "accuracy-estimate")
    assert "a drop of" in detail and ">= 0.05 from the reference" in detail
    run = mlflow_client(monitored["config"].tracking.uri).get_run(verdict.run_id)
    metrics = run.data.metrics
    assert metrics["monitor.accuracy-estimate.estimate"] == pytest.approx(accuracy.observed)
    assert metrics["monitor.accuracy-estimate.standard_error"] > 0
    assert metrics["monitor.auc-estimate.reference_realized"] > 0.5
    summary = (verdict.report_dir / "summary.md").read_text()
    assert "performance_estimate:accuracy" in summary and "prediction_drift" in summary
