"""The train flow through real Prefect (test harness) and a real MLflow store."""

import numpy as np
import pytest

from driftgate import registry
from driftgate.flows.train import train_flow
from driftgate.jobs import train as train_job
from driftgate.jobs.data import prepare_data
from driftgate.training.data import feature_matrix
from driftgate.training.evaluate import classification_metrics
from tests.conftest import mlflow_client
from tests.flows.prefect_runs import task_names


def test_train_flow_registers_a_version_that_reproduces_its_logged_accuracy(
    project_dir, project_config
):
    client = mlflow_client(project_config.tracking.uri)
    name = project_config.model.name
    before = {str(v.version) for v in client.search_model_versions(f"name='{name}'")}
    # Alone, this test meets a fresh store: no registered model, no aliases yet.
    registered = client.search_registered_models(f"name='{name}'")
    aliases_before = registered[0].aliases if registered else {}

    state = train_flow(config_path=str(project_dir / "driftgate.yaml"), return_state=True)
    assert state.is_completed()
    summary = state.result()
    # The training job's journey, each step a task named as the job names it.
    assert task_names(state.state_details.flow_run_id) == train_job.STEPS

    after = {str(v.version) for v in client.search_model_versions(f"name='{name}'")}
    assert after - before == {summary["version"]}
    run = client.get_run(summary["run_id"])
    assert run.data.metrics["test_accuracy"] == pytest.approx(summary["metrics"]["test_accuracy"])

    data = prepare_data(project_config)
    model = registry.load_pyfunc(project_config.tracking, f"models:/{name}/{summary['version']}")
    probabilities = np.asarray(
        model.predict(feature_matrix(data.splits.test, data.features))
    ).ravel()
    reproduced = classification_metrics(data.splits.test[data.target], probabilities)
    assert reproduced["accuracy"] == pytest.approx(run.data.metrics["test_accuracy"], abs=1e-12)
    assert client.get_registered_model(name).aliases == aliases_before  # training never promotes


def test_train_flow_fails_cleanly_on_bad_config(tmp_path):
    bad = tmp_path / "driftgate.yaml"
    bad.write_text("data:\n  bogus: 1\n")
    state = train_flow(config_path=str(bad), return_state=True)
    assert state.is_failed()
    with pytest.raises(Exception, match=r"data.bogus: unknown key"):
        state.result()
