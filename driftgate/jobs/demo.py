"""Checks the demo runs after each stage, so the main job proves what it claims."""

from __future__ import annotations

import subprocess
import sys
import time
from dataclasses import dataclass

import numpy as np

from driftgate import registry
from driftgate.config import ProjectConfig
from driftgate.jobs.data import prepare_data
from driftgate.training.data import feature_matrix
from driftgate.training.evaluate import classification_metrics


@dataclass(frozen=True)
class ReloadCheck:
    rows: int
    reloaded_accuracy: float


def check_registered_model(config: ProjectConfig, model_uri: str) -> ReloadCheck:
    """Load ``model_uri`` through MLflow's pyfunc flavour and score the test split."""
    data = prepare_data(config)
    model = registry.load_pyfunc(config.tracking, model_uri)
    features = feature_matrix(data.splits.test, data.features)
    probabilities = np.asarray(model.predict(features)).ravel()
    metrics = classification_metrics(data.splits.test[data.target], probabilities)
    return ReloadCheck(rows=len(features), reloaded_accuracy=metrics["accuracy"])


# -- the closed loop: serve, replay production, check each window, act -------------------

# The upstream fault injected into the replay: one sensor goes silent on a third of the
# days of one year, which the missing-values monitor (over 5%) must catch.
FAULT_FEATURE = "dew_point"
FAULT_YEAR = 1978
FAULT_EVERY = 3


@dataclass
class ReplayCounts:
    sent: int = 0
    ok: int = 0
    rejected: int = 0
    unavailable: int = 0
    with_fault: int = 0


def start_service(config_path: str | None, port: int, log_path) -> subprocess.Popen:
    """``driftgate serve`` in a child process (real HTTP on loopback)."""
    command = [
        sys.executable,
        "-m",
        "driftgate.cli",
        "serve",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
    ]
    if config_path:
        command += ["--config", config_path]
    log_file = open(log_path, "ab")  # noqa: SIM115 - owned by the child process
    return subprocess.Popen(command, stdout=log_file, stderr=subprocess.STDOUT)


def wait_until_ready(base_url: str, process: subprocess.Popen, timeout: float = 120.0) -> None:
    import httpx

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the service exited with code {process.returncode}")
        try:
            if httpx.get(f"{base_url}/readyz", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.3)
    raise TimeoutError(f"service at {base_url} not ready after {timeout:.0f} s")


def stop_service(process: subprocess.Popen) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def replay_production(base_url: str, frame, features: list[str], progress=None) -> ReplayCounts:
    """POST every production day, in date order, with its date as event time.

    Days of ``FAULT_YEAR`` lose ``FAULT_FEATURE`` on every ``FAULT_EVERY``-th day (null).
    """
    import httpx

    counts = ReplayCounts()
    with httpx.Client(base_url=base_url, timeout=30) as client:
        for index, row in enumerate(frame.itertuples(index=False)):
            record = {name: float(getattr(row, name)) for name in features}
            day = row.date
            if day.year == FAULT_YEAR and index % FAULT_EVERY == 0:
                record[FAULT_FEATURE] = None
                counts.with_fault += 1
            response = client.post(
                "/predict",
                json={"records": [record], "timestamp": day.tz_localize("UTC").isoformat()},
            )
            counts.sent += 1
            if response.status_code == 200:
                counts.ok += 1
            elif response.status_code == 503:
                counts.unavailable += 1
            else:
                counts.rejected += 1
            if progress is not None and counts.sent % 1000 == 0:
                progress(counts)
    return counts


def plot_drift_over_time(points: list[tuple], features: list[str], test: str, path) -> None:
    """One line per feature: ``test`` value per window end (PNG)."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot

    figure, axis = pyplot.subplots(figsize=(10, 5))
    ends = [end for end, _ in points]
    for feature in features:
        axis.plot(
            ends,
            [metrics.get(f"drift.{feature}.{test}") for _, metrics in points],
            marker="o",
            label=feature,
        )
    axis.set_xlabel("window end (event time)")
    axis.set_ylabel(f"{test} vs reference profile")
    axis.set_yscale("symlog", linthresh=0.1)
    axis.axhline(0.1, color="grey", linestyle="--", linewidth=1)
    axis.set_title(f"Drift over time: {test} per feature, yearly windows")
    axis.legend(fontsize=8, ncol=2)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    pyplot.close(figure)
