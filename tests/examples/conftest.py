"""The examples' loop through the real pieces: train -> promote (real MLflow store) ->
serve (uvicorn, real HTTP) -> drift-check (the real job) on the injected drift.

Each test copies its example folder to a temporary project, regenerates the example's
data with its own ``make_data.py`` (and checks it matches the committed file), and
runs the job functions the CLI runs.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import pytest

from tests.conftest import seed_mlflow_store

REPO_ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = REPO_ROOT / "examples"


def run_cli(
    config: Path, *args: str, timeout: float = 600, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess:
    """One command as a user types it: ``driftgate --config FILE COMMAND ...`` (``env``:
    variables added to this process's environment)."""
    return subprocess.run(
        [sys.executable, "-m", "driftgate.cli", "--config", str(config), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "NO_COLOR": "1", "COLUMNS": "200", **(env or {})},
    )


@dataclass
class ExampleRun:
    config: object
    gates: object
    data: object  # PreparedData
    training: object  # TrainingOutcome
    promotion: object  # PromotionOutcome
    responses: list  # the service's JSON answers, one per production row
    production: pd.DataFrame
    verdict: object  # the drift check's WindowVerdict
    reviews: list


def _module(path: Path):
    spec = importlib.util.spec_from_file_location(f"example_{path.parent.name}_data", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def copy_example(name: str, destination: Path) -> Path:
    """The example folder as a fresh project (no state), its data regenerated."""
    source = EXAMPLES / name
    shutil.copytree(
        source,
        destination,
        ignore=shutil.ignore_patterns(".driftgate", "__pycache__"),
        dirs_exist_ok=True,
    )
    committed = next(source.glob("*.csv"))
    regenerated = _module(destination / "make_data.py").main(destination / committed.name)
    assert regenerated.read_text() == committed.read_text(), (
        f"{committed} differs from what make_data.py writes: run it again and commit"
    )
    return destination / "driftgate.yaml"


def run_example(name: str, folder: Path) -> ExampleRun:
    from driftgate.config import load_config
    from driftgate.gates.config import load_gate_config
    from driftgate.jobs import drift_check
    from driftgate.jobs import train as train_job
    from driftgate.jobs.data import prepare_data
    from driftgate.jobs.promote import run_promotion
    from tests.serving.conftest import ThreadedService

    config = load_config(copy_example(name, folder))
    # The default store (`home` + mlflow.db), migrated already: the CLI examples (churn,
    # penguins) keep the clean clone's first store creation.
    seed_mlflow_store(config.home_dir / "mlflow.db")
    assert config.tracking.uri == f"sqlite:///{config.home_dir / 'mlflow.db'}"
    gates = load_gate_config(config.resolve(config.gates))
    training = train_job.run_training(config, on_epoch=None)
    promotion = run_promotion(config, gates)
    data = prepare_data(config, validate_contract=False)
    production = data.splits.production.reset_index(drop=True)
    time = config.data.time
    responses = []
    with ThreadedService(config, config.serving) as service:
        for _, row in production.iterrows():
            record = {f: float(row[f]) for f in data.features}
            answer = service.client.post(
                "/predict",
                json={"records": [record], "timestamp": f"{row[time]:%Y-%m-%d}T12:00:00+00:00"},
            )
            assert answer.status_code == 200, answer.text
            responses.append(answer.json())
    start = production[time].iloc[0].tz_localize("UTC")
    end = production[time].iloc[-1].tz_localize("UTC") + pd.Timedelta(days=1)
    verdict = drift_check.judge_window(config, gates, start, end)
    store = drift_check.review_store(config)
    try:
        reviews = store.list(status="open")
    finally:
        store.close()
    return ExampleRun(
        config, gates, data, training, promotion, responses, production, verdict, reviews
    )


def stored_samples(config) -> pd.DataFrame:
    """Every sample the example's service stored."""
    from driftgate.stores.samples import SqlSampleStore

    store = SqlSampleStore(config.serving.sample_store(config.home_dir))
    try:
        return store.read_window("2000-01-01", "2100-01-01")
    finally:
        store.close()


@pytest.fixture(scope="module")
def example_folder(tmp_path_factory):
    return lambda name: tmp_path_factory.mktemp(f"example-{name}")
