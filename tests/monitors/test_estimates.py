"""Issue 27: estimated metrics are a registry, and adding one is one module.

The built-in metrics keep their values (the registry is a refactor of the six
``if metric ==`` branches of monitors/outputs.py); the toy ``precision`` is the Python
block of docs/architecture.md's "Adding an estimated metric", read out of the doc so the
doc cannot rot, imported as a module of its own and unregistered afterwards.
"""

from __future__ import annotations

import importlib.util
import math
import re

import numpy as np
import pytest

from driftgate.monitors import estimates
from driftgate.monitors.estimates.registry import ESTIMATED
from driftgate.monitors.kinds.outputs import evaluate_output_monitor
from driftgate.monitors.outputs import OutputsProfile, output_frame
from driftgate.monitors.rules import Monitor
from tests.conftest import REPO_ROOT


def docs_example() -> str:
    text = (REPO_ROOT / "docs" / "architecture.md").read_text()
    section = text[text.index("#### Adding an estimated metric") :]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


@pytest.fixture
def precision(tmp_path):
    """The doc's module, imported from a file as a user's plugin would be."""
    path = tmp_path / "my_precision.py"
    path.write_text(docs_example())
    spec = importlib.util.spec_from_file_location("my_precision", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    yield module
    ESTIMATED.pop(("binary", "precision"), None)


def calibrated_binary(rng, rows: int, a: float = 2.0, b: float = 2.0):
    p = rng.beta(a, b, rows)
    return p, (rng.random(rows) < p).astype(int)


def monitor(metric: str) -> Monitor:
    return Monitor(name="m", metric=metric, threshold=0.05, schedule="0 * * * *", action="notify")


def test_the_built_in_metrics_are_registered_per_task():
    assert estimates.estimable("binary") == ("accuracy", "roc_auc")
    assert estimates.estimable("multiclass") == ("accuracy", "roc_auc")
    assert estimates.estimable("regression") == ("mae", "rmse")
    assert estimates.known_metrics() == ("accuracy", "mae", "rmse", "roc_auc")
    with pytest.raises(estimates.UnknownEstimatedMetricError, match="estimable: mae, rmse"):
        estimates.get_estimate("regression", "accuracy")


def test_a_metric_no_task_estimates_is_refused_at_config_load():
    with pytest.raises(ValueError, match="known: accuracy, mae, rmse, roc_auc"):
        monitor("performance_estimate:precision")
    # A regression's estimates are accepted (issue 31: "estimable: none" before).
    assert monitor("performance_estimate:rmse").metric == "performance_estimate:rmse"
    assert monitor("performance_estimate:mae").metric == "performance_estimate:mae"


def test_the_doc_example_is_one_module_that_holds_all_the_way(precision):
    assert estimates.estimable("binary") == ("accuracy", "roc_auc", "precision")
    assert monitor("performance_estimate:precision").metric == "performance_estimate:precision"

    rng = np.random.default_rng(7)
    profile = OutputsProfile.fit("binary", *calibrated_binary(rng, 3000))
    assert set(profile.estimated) == {"accuracy", "roc_auc", "precision"}
    assert profile.spread["precision"]["reference_std"] > 0

    # Calibrated outputs: the estimate tracks realized precision on a fresh window.
    scores, labels = calibrated_binary(rng, 4000)
    frame = output_frame("binary", scores, 0.5)
    estimate = profile.estimate(frame, "precision")
    realized = precision.BinaryPrecision().realized(frame, labels)
    assert estimate.value == pytest.approx(realized, abs=4 * estimate.standard_error)
    predicted = scores >= 0.5
    assert estimate.value == pytest.approx(profile.calibrator(scores[predicted]).mean())

    # A window of less confident positives: the monitor sees the drop and breaches.
    shifted = output_frame("binary", rng.beta(1.2, 3.0, 2000), 0.5)
    result = evaluate_output_monitor(monitor("performance_estimate:precision"), profile, shifted)
    assert result.status == "ok" and result.breached, result
    assert result.details["metric"] == "precision"
    calm = evaluate_output_monitor(monitor("performance_estimate:precision"), profile, frame)
    assert calm.status == "ok" and not calm.breached, calm


def test_a_champion_fitted_before_the_metric_says_so_instead_of_crashing(precision):
    ESTIMATED.pop(("binary", "precision"))
    rng = np.random.default_rng(8)
    older = OutputsProfile.fit("binary", *calibrated_binary(rng, 1000))  # without it
    estimates.register(precision.BinaryPrecision())
    frame = output_frame("binary", rng.beta(2, 2, 300), 0.5)
    result = evaluate_output_monitor(monitor("performance_estimate:precision"), older, frame)
    assert result.status == "error"
    assert "holds no reference for precision" in result.reason
    assert "train or adopt the model again" in result.reason
    assert not math.isnan(older.estimate(frame, "accuracy").value)
