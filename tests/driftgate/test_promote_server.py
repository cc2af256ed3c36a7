"""Promotion over HTTP against a real MLflow server that goes away mid-promotion."""

import pytest

from driftgate import registry
from driftgate.config import load_config
from driftgate.gates.config import load_gate_config
from driftgate.jobs import promote as promote_job
from tests.conftest import mlflow_client, register_session_fit


def test_registry_outage_leaves_aliases_unchanged_and_a_retry_succeeds(
    mlflow_server, trained_model, tmp_path, monkeypatch
):
    # Fail fast instead of MLflow's default minutes of retries with back-off.
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_TIMEOUT", "5")
    (tmp_path / "driftgate.yaml").write_text(
        f"home: state\nmodel:\n  name: served\ntracking:\n  uri: {mlflow_server.uri}\n"
    )
    config = load_config(tmp_path / "driftgate.yaml")
    assert config.tracking.artifact_location is None  # the server's artifact root applies
    # The session's fit, logged and registered over HTTP: the outage is the subject.
    version = register_session_fit(trained_model, config).registered.version
    result = promote_job.evaluate_gates(config, load_gate_config(), version)
    assert result.passed, result.table()

    mlflow_server.stop()
    with pytest.raises(registry.RegistryError, match="aliases unchanged"):
        promote_job.promote(config, result)

    mlflow_server.start()
    client = mlflow_client(mlflow_server.uri)
    assert client.get_registered_model("served").aliases == {}
    promote_job.promote(config, result)
    assert client.get_registered_model("served").aliases == {"champion": version}
