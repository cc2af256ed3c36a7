"""The model's outputs in the reference profile: prediction drift and the confidence-based
performance estimate (monitors/outputs.py), on simulated outputs with known truth."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from pydantic import ValidationError

from driftgate.monitors.actions.registry import ActionRequest
from driftgate.monitors.kinds.outputs import evaluate_output_monitor
from driftgate.monitors.outputs import (
    Calibrator,
    OutputsProfile,
    expected_roc_auc,
    output_frame,
)
from driftgate.monitors.profile import ReferenceProfile
from driftgate.monitors.rules import (
    Monitor,
    is_output_metric,
    is_stattest_metric,
    split_metric,
)

HOURLY = "0 * * * *"


def monitor(metric: str, threshold: float = 0.05, **options) -> Monitor:
    options.setdefault("schedule", HOURLY)
    return Monitor(name="m", metric=metric, threshold=threshold, action="notify", **options)


def calibrated_binary(rng, rows: int, a: float = 2.0, b: float = 2.0):
    """Outputs that are calibrated by construction: y ~ Bernoulli(p)."""
    p = rng.beta(a, b, rows)
    return p, (rng.random(rows) < p).astype(int)


def multiclass_outputs(rng, rows: int, classes: int = 3):
    logits = rng.normal(size=(rows, classes)) * 2
    probabilities = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    target = np.array([rng.choice(classes, p=row) for row in probabilities])
    return probabilities, target


@pytest.fixture(scope="module")
def binary():
    rng = np.random.default_rng(1)
    p, y = calibrated_binary(rng, 4000)
    return OutputsProfile.fit("binary", p, y)


# -- the metric syntax ----------------------------------------------------------------
def test_split_metric_parses_every_name_argument_form():
    assert split_metric("ks") == ("ks", None)
    assert split_metric("contract:range") == ("contract", "range")
    assert split_metric("performance_estimate:roc_auc") == ("performance_estimate", "roc_auc")
    assert split_metric("performance:accuracy") == ("performance", "accuracy")
    assert is_output_metric("prediction_drift") and is_output_metric("performance_estimate:x")
    assert not is_output_metric("ks") and not is_output_metric("performance:accuracy")
    assert is_stattest_metric("kl") and not is_stattest_metric("prediction_drift")
    assert not is_stattest_metric("contract:any") and not is_stattest_metric("performance:mae")


def test_output_monitors_are_validated_when_the_config_loads():
    assert monitor("performance_estimate:accuracy").metric == "performance_estimate:accuracy"
    with pytest.raises(ValidationError, match="unknown estimated metric 'f1'"):
        monitor("performance_estimate:f1")
    with pytest.raises(ValidationError, match="features must be 'all'"):
        monitor("prediction_drift", features=["x"])
    with pytest.raises(ValidationError, match="must be >= 0"):
        monitor("performance_estimate:roc_auc", threshold=-0.1)
    with pytest.raises(ValidationError, match="prediction_drift, performance_estimate:<metric>"):
        monitor("prediction_drft")


# -- the profile ----------------------------------------------------------------------
def test_output_frame_is_what_the_service_stores():
    from driftgate.serving.outputs import score

    rng = np.random.default_rng(0)
    binary = rng.random(50)
    multi, _ = multiclass_outputs(rng, 50)
    value = rng.normal(size=50)
    for task, outputs, classes in (
        ("binary", binary, ()),
        ("multiclass", multi, ("a", "b", "c")),
        ("regression", value, ()),
    ):
        frame, served = output_frame(task, outputs, 0.4), score(outputs, task, classes, 0.4)
        np.testing.assert_array_equal(frame["prediction"], served.prediction)
        if task != "regression":
            np.testing.assert_array_equal(frame["predicted_class"], served.predicted_class)


@pytest.mark.parametrize("task", ["binary", "multiclass", "regression"])
def test_the_profile_round_trips_the_outputs_and_the_calibrator_as_json(task, tmp_path):
    rng = np.random.default_rng(2)
    if task == "multiclass":
        outputs, target = multiclass_outputs(rng, 600)
    elif task == "binary":
        outputs, target = calibrated_binary(rng, 600)
    else:
        outputs, target = rng.normal(size=600), rng.normal(size=600)
    profile = ReferenceProfile.fit(pd.DataFrame({"x": rng.normal(size=100)}))
    profile.outputs = OutputsProfile.fit(task, outputs, target, classes=("a", "b", "c"))
    back = ReferenceProfile.load(profile.save(tmp_path / "profile")).outputs
    document = json.loads((tmp_path / "profile" / "outputs" / "outputs.json").read_text())
    assert document["task"] == task and back.task == task
    assert back.columns == profile.outputs.columns
    assert back.estimated == profile.outputs.estimated and back.realized == profile.outputs.realized
    if task == "regression":
        assert back.calibrator is None and back.columns == ["prediction"]
        return
    assert document["calibrator"]["method"] == "isotonic"
    scores = np.linspace(0, 1, 101)
    np.testing.assert_array_equal(back.calibrator(scores), profile.outputs.calibrator(scores))
    window = output_frame(task, outputs[:200], 0.5)
    assert back.estimate(window, "accuracy") == profile.outputs.estimate(window, "accuracy")


def test_a_profile_without_outputs_loads_and_its_output_monitors_say_why(tmp_path):
    old = ReferenceProfile.fit(pd.DataFrame({"x": np.arange(50.0)}))
    folder = old.save(tmp_path / "old")
    document = json.loads((folder / "profile.json").read_text())
    del document["files"]["outputs"]  # exactly as a profile written before outputs existed
    (folder / "profile.json").write_text(json.dumps(document))
    loaded = ReferenceProfile.load(folder)
    assert loaded.outputs is None
    window = output_frame("binary", np.full(100, 0.7), 0.5)
    for metric in ("prediction_drift", "performance_estimate:accuracy"):
        result = evaluate_output_monitor(monitor(metric), loaded.outputs, window)
        assert result.status == "insufficient_data" and not result.breached
        assert "no outputs" in result.reason


def test_a_window_without_output_columns_or_a_metric_of_another_task_is_not_judged(binary):
    features_only = pd.DataFrame({"x": np.arange(10.0)})
    result = evaluate_output_monitor(monitor("prediction_drift"), binary, features_only)
    assert result.status == "insufficient_data"
    assert "no prediction, predicted_class column" in result.reason
    rng = np.random.default_rng(3)
    multi = OutputsProfile.fit("multiclass", *multiclass_outputs(rng, 500))
    window = output_frame("multiclass", multiclass_outputs(rng, 100)[0], 0.5)
    result = evaluate_output_monitor(monitor("performance_estimate:rmse"), multi, window)
    assert result.status == "error" and "does not apply to this multiclass model" in result.reason
    assert "estimable: accuracy, roc_auc" in result.reason
    empty = evaluate_output_monitor(monitor("prediction_drift"), binary, window.iloc[:0])
    assert empty.status == "no_data"


def test_calibrator_refuses_one_class_and_bad_knots():
    from driftgate.monitors.outputs import OutputsError

    with pytest.raises(OutputsError, match="two outcomes"):
        Calibrator.fit(np.linspace(0, 1, 20), np.ones(20))
    with pytest.raises(OutputsError, match="sorted"):
        Calibrator.from_json({"method": "isotonic", "x": [0.5, 0.1], "y": [0.2, 0.3]})


# -- prediction drift -----------------------------------------------------------------
def test_prediction_drift_fires_when_the_outputs_shift_and_not_without(binary):
    rng = np.random.default_rng(4)
    rule = monitor("prediction_drift")
    calm = output_frame("binary", rng.beta(2, 2, 2000), 0.5)
    shifted = output_frame("binary", rng.beta(4, 2, 2000), 0.5)  # more confident in class 1
    quiet = evaluate_output_monitor(rule, binary, calm)
    fired = evaluate_output_monitor(rule, binary, shifted)
    assert quiet.status == "ok" and not quiet.breached
    assert fired.breached and fired.breached_features == ["predicted_class", "prediction"]
    assert fired.p_value < fired.level < 0.05 / 720  # Bonferroni over checks and outputs
    # Its review reads the p-value the right way round (it said "7.455e-08 > 0.05").
    window = (pd.Timestamp("2024-01-01", tz="UTC"), pd.Timestamp("2024-01-02", tz="UTC"))
    text = ActionRequest("model", "1", *window, fired).what
    assert text.startswith(f"{rule.name}: prediction_drift p = ") and " < 0.05 on " in text


def test_prediction_drift_does_not_breach_on_a_window_too_small_to_be_significant(binary):
    tiny = output_frame("binary", np.array([0.9, 0.95, 0.99]), 0.5)
    result = evaluate_output_monitor(monitor("prediction_drift"), binary, tiny)
    assert result.status == "ok" and not result.breached  # all class 1, yet 3 rows
    assert result.p_value > result.level


@pytest.mark.parametrize("rows", [50, 200, 500])
def test_prediction_drift_false_alarm_rate_is_within_its_budget(binary, rows):
    """No drift: the windows come from the reference distribution. One check per horizon
    with a 20% budget: each window may breach with chance at most 0.2."""
    rule = monitor(
        "prediction_drift",
        schedule="0 0 * * *",
        false_alarms={"rate": 0.2, "per": "1d"},
        effect_size_floor=0.0,
    )
    rng = np.random.default_rng(rows)
    windows = 200
    breaches = sum(
        evaluate_output_monitor(
            rule, binary, output_frame("binary", rng.beta(2, 2, rows), 0.5)
        ).breached
        for _ in range(windows)
    )
    bound = 0.2 + 3 * np.sqrt(0.2 * 0.8 / windows)
    assert breaches / windows <= bound, f"{breaches}/{windows} false alarms at {rows} rows"


# -- estimated performance ------------------------------------------------------------
def test_expected_roc_auc_with_hard_labels_is_the_roc_auc():
    from sklearn.metrics import roc_auc_score

    rng = np.random.default_rng(5)
    scores = np.round(rng.random(300), 2)  # ties count one half, as in sklearn
    labels = (rng.random(300) < scores).astype(int)
    assert expected_roc_auc(scores, labels) == pytest.approx(roc_auc_score(labels, scores))


@pytest.mark.parametrize("metric", ["accuracy", "roc_auc"])
def test_the_estimate_on_calibrated_outputs_is_unbiased_within_its_error(binary, metric):
    """Outputs calibrated by construction, from a shifted output distribution (so the
    performance itself changes): the estimate tracks the realized metric per window."""
    from driftgate.monitors.outputs import realized_metrics

    rng = np.random.default_rng(6)
    errors, inside = [], 0
    windows = 200
    for _ in range(windows):
        p, y = calibrated_binary(rng, 500, a=0.8, b=0.8)  # more confident than reference
        frame = output_frame("binary", p, 0.5)
        estimate = binary.estimate(frame, metric)
        realized = realized_metrics("binary", frame, y)[metric]
        errors.append(estimate.value - realized)
        inside += abs(estimate.value - realized) <= 1.96 * estimate.standard_error
    errors = np.asarray(errors)
    assert abs(errors.mean()) <= 3 * errors.std() / np.sqrt(windows) + 0.005
    assert inside / windows >= 0.9  # the sampling error covers the window's realized value
    assert binary.estimate(frame, metric).value > binary.estimated[metric]  # it did change


def test_the_estimate_breaches_only_when_the_model_is_estimated_to_be_hurt(binary):
    rng = np.random.default_rng(7)
    rule = monitor("performance_estimate:accuracy", threshold=0.05)
    unsure = output_frame("binary", rng.beta(8, 8, 2000), 0.5)  # outputs crowd around 0.5
    calm = output_frame("binary", rng.beta(2, 2, 2000), 0.5)
    hurt = evaluate_output_monitor(rule, binary, unsure)
    fine = evaluate_output_monitor(rule, binary, calm)
    assert hurt.breached and hurt.details["drop"] > 0.05 and hurt.p_value <= hurt.level
    assert hurt.observed == pytest.approx(hurt.details["estimate"])
    assert fine.status == "ok" and not fine.breached
    tiny = evaluate_output_monitor(rule, binary, unsure.iloc[:3])
    assert tiny.status == "insufficient_data" and "no-drift spread" in tiny.reason


def test_estimate_false_alarm_rate_is_within_its_budget_over_references():
    """No drift, a 20% budget per check, threshold 0: the share of breaching windows, over
    references as well as windows (the budget holds over both; one unlucky reference
    makes its windows likelier to breach), is at most 0.2 within its standard error."""
    rules = {
        metric: monitor(
            metric, threshold=0.0, schedule="0 0 * * *", false_alarms={"rate": 0.2, "per": "1d"}
        )
        for metric in ("performance_estimate:accuracy", "performance_estimate:roc_auc")
    }
    rng = np.random.default_rng(9)
    shares = {(metric, rows): [] for metric in rules for rows in (50, 1000)}
    windows = 30
    for _ in range(8):
        profile = OutputsProfile.fit("binary", *calibrated_binary(rng, 1500))
        for rows in (50, 1000):
            frames = [output_frame("binary", rng.beta(2, 2, rows), 0.5) for _ in range(windows)]
            for metric, rule in rules.items():
                breached = [evaluate_output_monitor(rule, profile, f).breached for f in frames]
                shares[metric, rows].append(np.mean(breached))
    for key, found in shares.items():
        found = np.asarray(found)
        error = max(found.std(ddof=1) / np.sqrt(found.size), np.sqrt(0.16 / (found.size * windows)))
        assert found.mean() <= 0.2 + 3 * error, (key, found.mean(), error)


def test_multiclass_accuracy_is_estimated_from_the_top_class_confidence():
    rng = np.random.default_rng(8)
    profile = OutputsProfile.fit("multiclass", *multiclass_outputs(rng, 3000))
    outputs, target = multiclass_outputs(rng, 1000)
    frame = output_frame("multiclass", outputs, 0.5)
    estimate = profile.estimate(frame, "accuracy")
    realized = float(np.mean(outputs.argmax(axis=1) == target))
    assert abs(estimate.value - realized) <= 3 * estimate.standard_error


def test_non_finite_outputs_are_not_profiled_and_say_how_many():
    from driftgate.monitors.outputs import OutputsError

    outputs = np.array([0.2, np.nan, 0.7, np.inf, 0.4])
    with pytest.raises(OutputsError, match="2 of 5 validation outputs are NaN or infinite"):
        OutputsProfile.fit("binary", outputs, np.array([0, 1, 1, 0, 1]))
