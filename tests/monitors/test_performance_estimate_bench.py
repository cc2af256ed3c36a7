"""Short variant of benchmarks/performance_estimate_bench.py: the no-drift false alarms of
the output monitors on a seeded calibrated population, and the figures' arithmetic (the
full run trains the demo model and is documented in docs/monitors.md)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from benchmarks import performance_estimate_bench as bench
from driftgate.monitors.outputs import OutputsProfile


def test_no_drift_windows_breach_at_most_at_the_nominal_level():
    rng = np.random.default_rng(0)
    scores = rng.beta(2, 2, 2000)
    labels = (rng.random(2000) < scores).astype(int)
    rows = bench.false_alarms(scores, labels, sizes=(50, 300), references=4, windows=20, level=0.2)
    assert {row[1] for row in rows} == {
        "prediction_drift",
        "performance_estimate:accuracy",
        "performance_estimate:roc_auc",
    }
    for n, metric, share, total, error in rows:
        assert total == 80 and error >= math.sqrt(0.2 * 0.8 / total)
        assert share <= 0.2 + 3 * error, (n, metric, share, error)


def test_direction_agreement_ignores_no_change_and_counts_signs():
    assert bench.agreement(np.array([0.1, -0.2, 0.0]), np.array([0.3, -0.1, 0.2])) == 1.0
    assert bench.agreement(np.array([0.1, 0.2]), np.array([-0.1, 0.2])) == 0.5


def test_a_perfect_estimate_has_no_error_and_always_agrees():
    rng = np.random.default_rng(1)
    p = rng.beta(2, 2, 1000)
    profile = OutputsProfile.fit("binary", p, (rng.random(1000) < p).astype(int))
    realized = np.array([0.70, 0.72, 0.65, 0.60])
    table = pd.DataFrame(
        {
            "realized_accuracy": realized,
            "estimated_accuracy": realized,
            "accuracy_se": 0.02,
            "realized_roc_auc": realized + 0.1,
            "estimated_roc_auc": realized + 0.1,
            "roc_auc_se": 0.02,
            "raw_confidence": realized + 0.05,
        }
    )
    figures = bench.summarise_validation(table, profile)
    assert figures["accuracy_mae"] == 0 and figures["roc_auc_mae"] == 0
    assert figures["accuracy_covered"] == 1 and figures["accuracy_direction_yearly"] == 1
    assert math.isclose(figures["accuracy_mae_raw_confidence"], 0.05)
