"""registry.tracking_client: one MlflowClient per tracking store, shared by every
registry function, on a real SQLite store and a real promotion.

The promotion is counted with a spy on ``MlflowClient.__init__`` that calls the real
constructor: nothing is replaced, each construction is only noted with its caller.
"""

from __future__ import annotations

import sys

import pytest
from mlflow import MlflowClient

from driftgate import registry
from driftgate.config import TrackingSettings, load_config
from driftgate.gates.config import load_gate_config
from driftgate.jobs import promote as promote_job
from driftgate.jobs import train as train_job
from driftgate.training.train import TrainParams
from tests.conftest import seed_mlflow_store
from tests.driftgate.lenient_gates import LENIENT_GATES


def settings_in(folder, experiment="driftgate") -> TrackingSettings:
    return TrackingSettings(
        uri=seed_mlflow_store(folder / "mlflow.db"),
        artifact_location=(folder / "mlartifacts").as_uri(),
        experiment=experiment,
    )


@pytest.fixture
def constructions(monkeypatch) -> list[str]:
    """The module that built each MlflowClient from now on (the real one is built)."""
    callers: list[str] = []
    real_init = MlflowClient.__init__

    def counted_init(self, *args, **kwargs):
        callers.append(sys._getframe(1).f_globals.get("__name__", "?"))
        real_init(self, *args, **kwargs)

    monkeypatch.setattr(MlflowClient, "__init__", counted_init)
    return callers


def test_equal_settings_share_one_tracking_client_and_its_client(tmp_path, constructions):
    settings = settings_in(tmp_path)
    shared = registry.tracking_client(settings)
    assert registry.tracking_client(settings.model_copy()) is shared
    assert shared.settings == settings
    assert constructions == []  # nothing is built before a call needs it
    client = shared.client
    assert registry.mlflow_client(settings) is client
    assert shared.client is client
    assert constructions == ["driftgate.registry.client"]
    # Its registry is the same store, never MLflow's process-wide registry URI.
    assert client._registry_uri == settings.uri
    assert client._tracking_client.tracking_uri == settings.uri


def test_other_settings_get_their_own_client(tmp_path):
    first = registry.tracking_client(settings_in(tmp_path / "a"))
    other_store = registry.tracking_client(settings_in(tmp_path / "b"))
    other_experiment = registry.tracking_client(settings_in(tmp_path / "a", "monitoring"))
    assert len({id(first), id(other_store), id(other_experiment)}) == 3
    assert first.client is not other_store.client


def test_settings_changed_in_place_find_the_client_of_what_they_say_now(tmp_path):
    settings = settings_in(tmp_path / "a")
    before = registry.tracking_client(settings)
    settings.uri = settings_in(tmp_path / "b").uri
    after = registry.tracking_client(settings)
    assert after is not before
    assert after.uri == settings.uri and before.uri != settings.uri


def test_registry_calls_on_a_real_store_reuse_the_one_client(tmp_path, constructions):
    settings = settings_in(tmp_path)
    registry.connect(settings)
    for _ in range(3):
        assert registry.alias_version(settings, "absent", registry.CHAMPION_ALIAS) is None
    with pytest.raises(registry.RegistryError, match="no completely registered version"):
        registry.latest_version(settings, "absent")
    with pytest.raises(registry.UnknownModelError, match="models:/absent/1"):
        registry.existing_version(settings, "absent", "1")
    assert constructions.count("driftgate.registry.client") == 1
    assert not [c for c in constructions if c.startswith("driftgate.") and "client" not in c]


@pytest.fixture(scope="module")
def trained_project(tmp_path_factory):
    """A project of its own (its aliases move) with one small model registered."""
    root = tmp_path_factory.mktemp("counted")
    (root / "driftgate.yaml").write_text("home: state\nmodel:\n  name: counted\n")
    seed_mlflow_store(root / "state" / "mlflow.db")  # the store `home: state` opens
    (root / "gates.yaml").write_text(LENIENT_GATES)
    config = load_config(root / "driftgate.yaml")
    config.train = TrainParams(max_epochs=3)
    data = train_job.prepare_data(config)
    result = train_job.fit_model(config, data, on_epoch=None)
    metrics = train_job.evaluate_model(config, data, result)
    version = train_job.register_model(config, data, result, metrics).registered.version
    return config, load_gate_config(root / "gates.yaml"), version


def test_a_promotion_builds_at_most_one_client_of_its_own(trained_project, constructions):
    """Before the registry held one client, this promotion built 10 (one per call)."""
    config, gates, version = trained_project
    outcome = promote_job.run_promotion(config, gates, candidate=version)
    assert outcome.promoted, outcome.result
    assert registry.alias_version(config.tracking, "counted", registry.CHAMPION_ALIAS) == version
    ours = [c for c in constructions if c.startswith("driftgate.")]
    # At most one: the training above may already have built the store's client.
    assert ours in ([], ["driftgate.registry.client"]), ours


@pytest.mark.parametrize(
    ("read", "expected"),
    [
        (
            lambda s: registry.version_features(s, "absent-model", "1"),
            "cannot read absent-model v1",
        ),
        (lambda s: registry.run_metrics(s, "0" * 32), f"cannot read run {'0' * 32}"),
    ],
)
def test_reads_that_miss_raise_a_registry_error_saying_what_failed(tmp_path, read, expected):
    """Before, these two reads let MLflow's own exception escape (a traceback at the CLI)."""
    with pytest.raises(registry.RegistryError, match=expected):
        read(settings_in(tmp_path))
