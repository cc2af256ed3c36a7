"""Facts the gate shares with training and serving are stated once."""

from __future__ import annotations

from typing import get_args

import numpy as np

from driftgate.config.serving import ServingSettings
from driftgate.gates.checks import get_check
from driftgate.gates.checks.degenerate_output import DegenerateOutputCheck, check_degenerate_output
from driftgate.gates.config import MetricGate
from driftgate.training.evaluate import (
    DECISION_THRESHOLD,
    METRIC_NAMES,
    TASK_METRICS,
    classification_metrics,
    task_metrics,
)
from driftgate.training.features import TASKS


def test_metric_names_are_one_fact():
    """The gate's metric keys are the names each task's metrics function returns."""
    y, p = np.array([0, 1, 1, 0]), np.array([0.1, 0.9, 0.6, 0.4])
    assert tuple(classification_metrics(y, p)) == TASK_METRICS["binary"]
    outputs = {
        "binary": p,
        "multiclass": np.array([[0.9, 0.1], [0.2, 0.8], [0.4, 0.6], [0.7, 0.3]]),
        "regression": np.array([0.2, 0.8, 1.1, 0.1]),
    }
    assert set(TASK_METRICS) == set(TASKS)
    for task in TASKS:
        assert tuple(task_metrics(task, y, outputs[task])) == TASK_METRICS[task]
    assert set(METRIC_NAMES) == {name for names in TASK_METRICS.values() for name in names}
    assert get_args(MetricGate.model_fields["metric"].annotation) == METRIC_NAMES
    overfitting = get_check("overfitting").settings
    metric = get_args(overfitting.model_fields["metric"].annotation)
    assert get_args(metric[0]) == METRIC_NAMES and metric[1] is type(None)


def test_decision_threshold_is_one_fact():
    assert ServingSettings().decision_threshold == DECISION_THRESHOLD
    # Exactly at the threshold is class 1, as in accuracy and in the service.
    at_threshold = np.full(10, DECISION_THRESHOLD)
    result = check_degenerate_output(at_threshold, DegenerateOutputCheck())
    assert result.observed == "100.00% class 1"
    assert classification_metrics(np.ones(10, int), at_threshold)["accuracy"] == 1.0


def test_a_configured_decision_threshold_is_the_one_every_class_is_taken_at():
    """Serving's answer, training's and the gate's accuracy, the degenerate-output share,
    the production accuracy monitor and the output monitors' class column all turn
    P(class 1) into a class at the same configured threshold."""
    from driftgate.monitors.outputs import CLASS_COLUMN, output_frame
    from driftgate.monitors.performance import metric_function
    from driftgate.serving.outputs import score

    threshold = 0.3
    p = np.array([0.1, 0.25, 0.3, 0.35, 0.45, 0.6, 0.9, 0.29])
    y = np.ones(len(p), int)
    served = np.asarray(score(p, "binary", (), threshold).fields["classes"])
    assert served.tolist() == [0, 0, 1, 1, 1, 1, 1, 0]
    accuracy = float(served.mean())
    assert classification_metrics(y, p, threshold)["accuracy"] == accuracy
    assert task_metrics("binary", y, p, threshold)["accuracy"] == accuracy
    assert metric_function("binary", "accuracy", decision_threshold=threshold)(y, p) == accuracy
    assert output_frame("binary", p, threshold)[CLASS_COLUMN].tolist() == served.tolist()
    result = check_degenerate_output(p, DegenerateOutputCheck(), "binary", threshold)
    assert result.observed == f"{served.mean():.2%} class 1"
    # ... and at the default the same outputs give other classes.
    assert classification_metrics(y, p)["accuracy"] != accuracy
