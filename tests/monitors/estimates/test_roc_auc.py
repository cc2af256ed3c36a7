"""Multiclass ROC AUC (one-vs-rest, macro) estimated from what the sample store keeps
of each record, its top probability and predicted class (issue 31)."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.metrics import roc_auc_score

from driftgate.monitors.estimates import get_estimate
from driftgate.monitors.kinds.outputs import evaluate_output_monitor
from driftgate.monitors.outputs import OutputsProfile, output_frame
from driftgate.monitors.rules import Monitor


def multiclass(rng, rows: int, classes: int = 3, sharpness: float = 2.0):
    """Calibrated softmax outputs and labels drawn from them; ``sharpness`` < 2 makes
    the model less sure (and less right) than on the reference."""
    logits = rng.normal(size=(rows, classes)) * sharpness
    probabilities = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    target = (rng.random((rows, 1)) > probabilities.cumsum(axis=1)).sum(axis=1)
    return probabilities, target


@pytest.fixture(scope="module")
def profile():
    return OutputsProfile.fit("multiclass", *multiclass(np.random.default_rng(31), 4000))


def test_the_stored_scores_rank_as_the_full_probabilities_spread_evenly():
    rng = np.random.default_rng(32)
    probabilities, target = multiclass(rng, 2000, classes=4)
    frame = output_frame("multiclass", probabilities, 0.5)
    top = probabilities.max(axis=1, keepdims=True)
    even = np.where(probabilities == top, top, (1 - top) / 3)  # the rest spread evenly
    expected = roc_auc_score(target, even / even.sum(axis=1, keepdims=True), multi_class="ovr")
    realized = get_estimate("multiclass", "roc_auc").realized(frame, target)
    assert realized == pytest.approx(expected, abs=1e-9)


def test_the_estimate_tracks_realized_auc_as_confidence_falls(profile):
    rng = np.random.default_rng(33)
    assert profile.estimated["roc_auc"] == pytest.approx(profile.realized["roc_auc"], abs=0.02)
    values = []
    for sharpness in (2.0, 1.0, 0.5):
        probabilities, target = multiclass(rng, 3000, sharpness=sharpness)
        frame = output_frame("multiclass", probabilities, 0.5)
        estimate = profile.estimate(frame, "roc_auc")
        realized = get_estimate("multiclass", "roc_auc").realized(frame, target)
        assert 0 < estimate.standard_error < 0.05
        assert abs(estimate.value - realized) <= max(4 * estimate.standard_error, 0.03), (
            sharpness,
            estimate.value,
            realized,
        )
        values.append(estimate.value)
    assert values[0] > values[1] + 0.05 > values[2] + 0.1  # falls with the confidence


def test_the_monitor_breaches_on_the_fall_and_not_on_a_calm_window(profile, tmp_path):
    rule = Monitor(
        name="auc", metric="performance_estimate:roc_auc", threshold=0.05,
        schedule="0 * * * *", action="notify",
    )  # fmt: skip
    rng = np.random.default_rng(34)
    loaded = OutputsProfile.load(profile.save(tmp_path / "outputs"))
    worse = output_frame("multiclass", multiclass(rng, 500, sharpness=0.7)[0], 0.5)
    result = evaluate_output_monitor(rule, loaded, worse)
    assert result.status == "ok" and result.breached, result
    calm = output_frame("multiclass", multiclass(rng, 500)[0], 0.5)
    result = evaluate_output_monitor(rule, loaded, calm)
    assert result.status == "ok" and not result.breached, result
