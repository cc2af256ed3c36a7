"""Monitors that can never run on the champion are refused where the champion is known
(issue 30): the drift check's start and ``monitors plan``, exit 2 naming each monitor
and why; never an ``error`` on every window with exit 0. Through the installed CLI, on
the session's trained binary classifier and a Parquet window of its test rows."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from driftgate import registry
from tests.conftest import mlflow_client

DRIFTGATE = str(Path(sys.executable).with_name("driftgate"))
UNRUNNABLE = {
    "estimate-rmse": "performance_estimate:rmse",  # no estimate of rmse for a classifier
    "realized-rmse": "performance:rmse",  # nor a realized one
    "cats": "chi2",  # the rainfall model has no categorical feature
}


def driftgate(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [DRIFTGATE, *args], cwd=cwd, capture_output=True, text=True, timeout=300,
        env={**os.environ, "NO_COLOR": "1", "COLUMNS": "200"},
    )  # fmt: skip


@pytest.fixture(scope="module")
def champion(trained_model, project_dir, tmp_path_factory):
    config = trained_model.config
    mlflow_client(config.tracking.uri).set_registered_model_alias(
        config.model.name, registry.CHAMPION_ALIAS, trained_model.outcome.registered.version
    )
    folder = tmp_path_factory.mktemp("unrunnable")
    monitors = "".join(
        f"  - {{name: {name}, metric: '{metric}', threshold: 0.1, schedule: '0 * * * *', "
        "window: 1d, action: notify, calibrated: false}\n"
        for name, metric in {"inputs-kl": "kl", **UNRUNNABLE}.items()
    )
    (folder / "gates.yaml").write_text(f"monitors:\n{monitors}")
    test = trained_model.data.splits.test[list(trained_model.data.features)].iloc[:200].copy()
    test["timestamp"] = pd.date_range("2031-03-01", periods=len(test), freq="min", tz="UTC")
    test.to_parquet(folder / "window.parquet")
    return folder, project_dir / "driftgate.yaml"


def expected_lines(prefix: str = "") -> list[str]:
    return [
        f"{prefix}monitor 'estimate-rmse': performance_estimate:rmse does not apply to the "
        "champion, a binary model (estimable: accuracy, roc_auc)",
        f"{prefix}monitor 'realized-rmse': performance:rmse cannot be judged on the champion, "
        "a binary model: 'rmse' is not a metric of a binary model (its metrics: accuracy, "
        "roc_auc, log_loss)",
        f"{prefix}monitor 'cats': statistic 'chi2' applies to categorical features, and the "
        "model has none:",
    ]


def test_the_drift_check_refuses_them_at_its_start_naming_each(champion):
    folder, config = champion
    done = driftgate(
        "drift-check", "--gates", "gates.yaml", "--source", "window.parquet",
        "--end", "2031-03-02", "--window", "1d", "-c", str(config), cwd=folder,
    )  # fmt: skip
    assert done.returncode == 2, done.stdout + done.stderr[-3000:]
    assert "Traceback" not in done.stderr
    for line in expected_lines("gates.yaml: "):
        assert line in done.stderr, done.stderr
    assert "inputs-kl" not in done.stderr  # the monitor that can run is not named
    assert done.stdout == ""  # no window judged, no report


def test_monitors_plan_refuses_them_naming_each(champion):
    folder, config = champion
    done = driftgate(
        "monitors", "plan", "--gates", "gates.yaml", "--rows-per-window", "100",
        "-c", str(config), cwd=folder,
    )  # fmt: skip
    assert done.returncode == 2, done.stdout + done.stderr[-3000:]
    assert "Traceback" not in done.stderr
    for line in expected_lines():
        assert line in done.stderr, done.stderr
