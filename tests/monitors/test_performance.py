"""Realized-performance monitors in the domain: the metric functions agree with
training.evaluate, the drop judgement, the monitor's outcomes, the metric parser and
a short variant of benchmarks/performance_monitor_bench.py (false breaches, power)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from benchmarks import performance_monitor_bench as bench
from driftgate.core.yamlconfig import ConfigError
from driftgate.monitors.labels import LabelError, check_label
from driftgate.monitors.performance import (
    Realized,
    evaluate_performance,
    judge_drop,
    metric_function,
    realized_performance,
)
from driftgate.monitors.rules import (
    Monitor,
    check_monitors_against,
    decision_options,
    group_by_threshold,
    split_metric,
)
from driftgate.training.evaluate import (
    classification_metrics,
    multiclass_metrics,
    regression_metrics,
)


def _monitor(**changes) -> Monitor:
    settings = {
        "name": "perf",
        "metric": "performance:roc_auc",
        "threshold": 0.05,
        "schedule": "0 0 * * *",
        "action": "open_review",
        "min_labels": 50,
    }
    return Monitor(**{**settings, **changes})


def test_the_metric_functions_agree_with_training_evaluate():
    rng = np.random.default_rng(0)
    y = (rng.random(500) < 0.4).astype(int)
    p = np.clip(0.3 * y + rng.random(500) * 0.7, 0, 1)
    expected = classification_metrics(y, p)
    for name in ("accuracy", "roc_auc", "log_loss"):
        assert metric_function("binary", name)(y, p) == pytest.approx(expected[name], abs=1e-9)
    probabilities = rng.dirichlet(np.ones(4), 500)
    truth = rng.integers(0, 4, 500)
    expected = multiclass_metrics(truth, probabilities)
    predicted = probabilities.argmax(axis=1)
    for name in ("accuracy", "macro_f1"):
        got = metric_function("multiclass", name, 4)(truth, predicted)
        assert got == pytest.approx(expected[name], abs=1e-9)
    values = rng.normal(size=500)
    guesses = values + rng.normal(scale=0.3, size=500)
    expected = regression_metrics(values, guesses)
    for name in ("rmse", "mae", "r2"):
        assert metric_function("regression", name)(values, guesses) == pytest.approx(
            expected[name], abs=1e-9
        )


def test_metrics_the_samples_cannot_give_are_named():
    with pytest.raises(ValueError, match="every class's probability"):
        metric_function("multiclass", "log_loss", 3)
    with pytest.raises(ValueError, match="not a metric of a regression model"):
        metric_function("regression", "roc_auc")


def test_the_bootstrap_error_is_seeded_and_near_the_binomial_one():
    rng = np.random.default_rng(1)
    y = (rng.random(2000) < 0.5).astype(int)
    p = np.where(rng.random(2000) < 0.8, y, 1 - y).astype(float)  # 80% right
    first = realized_performance("binary", "accuracy", y, p)
    assert first == realized_performance("binary", "accuracy", y, p)  # same labels, same se
    binomial = math.sqrt(first.value * (1 - first.value) / 2000)
    assert first.se == pytest.approx(binomial, rel=0.2)
    assert first.ci[0] < first.value < first.ci[1]


def test_a_drop_breaches_only_when_over_the_threshold_and_significant():
    sure = Realized("roc_auc", 0.70, 0.01, (0.68, 0.72), 1000)
    assert judge_drop(sure, 0.80, 0.05, 0.01).breached  # drop 0.10, z = 10
    noisy = Realized("roc_auc", 0.70, 0.08, (0.54, 0.86), 30)
    verdict = judge_drop(noisy, 0.80, 0.05, 0.01)
    assert not verdict.breached and verdict.p_value > 0.01
    assert verdict.min_detectable == pytest.approx(2.326 * 0.08, rel=1e-3)
    assert judge_drop(noisy, 0.80, 0.05, None).breached  # calibrated: false, bare threshold
    small = Realized("roc_auc", 0.78, 0.001, (0.778, 0.782), 10**6)
    assert not judge_drop(small, 0.80, 0.05, 0.01).breached  # significant but under 0.05
    worse_rmse = Realized("rmse", 1.5, 0.01, (1.48, 1.52), 1000)
    assert judge_drop(worse_rmse, 1.0, 0.2, 0.01).drop == pytest.approx(0.5)  # lower is better
    assert judge_drop(worse_rmse, 1.0, 0.2, 0.01).breached


def test_the_monitor_outcomes():
    rng = np.random.default_rng(2)
    y = (rng.random(400) < 0.4).astype(float)
    p = np.clip(0.5 * y + rng.random(400) * 0.5, 0, 1)
    monitor = _monitor()
    ok = evaluate_performance(monitor, task="binary", classes=0, y=y, outputs=p, baseline=0.9)
    assert ok.status == "ok" and ok.labels == 400 and ok.baseline == 0.9
    assert ok.observed == pytest.approx(0.9 - ok.realized)
    assert "on 400 labels vs 0.9 at the gate" in ok.reason
    few = evaluate_performance(monitor, task="binary", classes=0, y=y[:10], outputs=p[:10],
                               baseline=0.9)  # fmt: skip
    assert few.status == "insufficient_data" and not few.breached and few.labels == 10
    one_class = evaluate_performance(
        monitor, task="binary", classes=0, y=np.ones(100), outputs=p[:100], baseline=0.9
    )
    assert one_class.status == "insufficient_data" and "undefined" in one_class.reason
    no_baseline = evaluate_performance(
        monitor, task="binary", classes=0, y=y, outputs=p, baseline=None
    )
    assert no_baseline.status == "error" and "test_roc_auc" in no_baseline.reason
    wrong_task = evaluate_performance(
        monitor, task="regression", classes=0, y=y, outputs=p, baseline=0.9
    )
    assert wrong_task.status == "error" and "not a metric of a regression" in wrong_task.reason
    assert ok.to_dict()["ci"] == list(ok.ci)


def test_the_metric_parser_and_the_rule_model():
    assert split_metric("performance:roc_auc") == ("performance", "roc_auc")
    assert split_metric("contract:range") == ("contract", "range")
    assert split_metric("ks") == ("ks", None)
    with pytest.raises(ValueError, match="unknown performance metric 'auc'"):
        _monitor(metric="performance:auc")
    performance, drift = _monitor(), _monitor(name="d", metric="kl", threshold=0.1)
    assert group_by_threshold([performance, drift], ["a"]) == [[drift]]
    assert decision_options([performance, drift], ["a"])["thresholds"] == {"kl": 0.1}
    assert performance.level(8) == performance.level(1)  # one test, whatever the features
    check_monitors_against([performance], ["a"])
    with pytest.raises(ConfigError, match="a performance monitor judges the model's output"):
        check_monitors_against([_monitor(features=["a"])], ["a"])


@pytest.mark.parametrize(
    "task, classes, label, expected",
    [
        ("binary", (), 1, ("1", 1.0)),
        ("binary", (), 0, ("0", 0.0)),
        ("multiclass", ("a", "b", "3"), "b", ("b", 1.0)),
        ("multiclass", ("a", "b", "3"), 3, ("3", 2.0)),  # an integer spelling a class
        ("regression", (), 2, ("2.0", 2.0)),
        ("regression", (), -0.25, ("-0.25", -0.25)),
    ],
)
def test_labels_of_each_task(task, classes, label, expected):
    checked = check_label(task, classes, label)
    assert (checked.text, checked.value) == expected


@pytest.mark.parametrize(
    "task, classes, label, reason",
    [
        ("binary", (), 2, "integer 0 or 1"),
        ("binary", (), True, "integer 0 or 1"),
        ("binary", (), 1.0, "integer 0 or 1"),
        ("binary", (), "1", "integer 0 or 1"),
        ("multiclass", ("a", "b"), "c", "not a class of the model"),
        ("multiclass", ("a", "b"), 1.5, "must be one of the classes"),
        ("regression", (), float("nan"), "finite"),
        ("regression", (), float("inf"), "finite"),
        ("regression", (), "1.0", "must be a number"),
        ("regression", (), False, "must be a number"),
    ],
)
def test_wrong_labels_say_what_the_task_expects(task, classes, label, reason):
    with pytest.raises(LabelError, match=reason):
        check_label(task, classes, label)


def test_short_simulation_no_false_breaches_and_power_at_a_real_drop():
    null = bench.cell(300, 60, 0.0, seed=11)
    assert null["calibrated"] <= 0.05  # level 0.01; 60 windows
    assert null["bare"] > null["calibrated"]  # the peer: a bare threshold breaches on noise
    # The bootstrap error matches the spread of the realized AUC over windows.
    assert null["mean_se"] == pytest.approx(null["spread"], rel=0.35)
    drop = bench.cell(1_000, 30, bench.FLIP, seed=12)
    assert drop["calibrated"] >= 0.9
