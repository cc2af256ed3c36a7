"""Facts the gate shares with training and serving are stated once."""

from __future__ import annotations

from typing import get_args

import numpy as np

from driftgate.config.serving import ServingSettings
from driftgate.gates.checks import get_check
from driftgate.gates.checks.degenerate_output import DegenerateOutputCheck, check_degenerate_output
from driftgate.gates.config import MetricGate
from driftgate.training.evaluate import DECISION_THRESHOLD, METRIC_NAMES, classification_metrics


def test_metric_names_are_one_fact():
    """The gate's metric keys are the names classification_metrics returns."""
    y, p = np.array([0, 1, 1, 0]), np.array([0.1, 0.9, 0.6, 0.4])
    assert tuple(classification_metrics(y, p)) == METRIC_NAMES
    assert get_args(MetricGate.model_fields["metric"].annotation) == METRIC_NAMES
    overfitting = get_check("overfitting").settings
    assert get_args(overfitting.model_fields["metric"].annotation) == METRIC_NAMES


def test_decision_threshold_is_one_fact():
    assert ServingSettings().decision_threshold == DECISION_THRESHOLD
    # Exactly at the threshold is class 1, as in accuracy and in the service.
    at_threshold = np.full(10, DECISION_THRESHOLD)
    result = check_degenerate_output(at_threshold, DegenerateOutputCheck())
    assert result.observed == "100.00% class 1"
    assert classification_metrics(np.ones(10, int), at_threshold)["accuracy"] == 1.0
