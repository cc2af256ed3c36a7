"""The tracking settings and the one ``MlflowClient`` every registry function uses.

Before, each registry function built its own client from the settings it was handed
(a promotion built about twenty). Now :func:`tracking_client` gives the one
:class:`TrackingClient` of a set of settings, the same object for equal settings in a
process, and its client is created on first use. The client names its registry store
as well as its tracking store, never MLflow's process-wide default
(``tests/test_mlflow_clients.py`` says why).

An ``MlflowClient`` holds its URIs only: it looks its store up in MLflow's own per-URI
cache on every call. So one shared client keeps nothing alive and is safe between the
service's threads; what it saves is building it, and passing the settings around.
"""

from __future__ import annotations

import os
import threading
from typing import TYPE_CHECKING

from driftgate.config import TrackingSettings

if TYPE_CHECKING:
    from mlflow import MlflowClient


class TrackingClient:
    """One tracking store's settings and its ``MlflowClient``, created once, lazily."""

    def __init__(self, settings: TrackingSettings) -> None:
        self.settings = settings
        self._client: MlflowClient | None = None
        self._lock = threading.Lock()

    @property
    def uri(self) -> str | None:
        return self.settings.uri

    @property
    def client(self) -> MlflowClient:
        with self._lock:
            if self._client is None:
                from mlflow import MlflowClient

                # Artifact downloads draw tqdm bars on stderr; CI logs want the gate
                # table instead.
                os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
                self._client = MlflowClient(tracking_uri=self.uri, registry_uri=self.uri)
            return self._client


_CLIENTS: dict[tuple[str | None, str | None, str], TrackingClient] = {}
_CLIENTS_LOCK = threading.Lock()


def tracking_client(settings: TrackingSettings) -> TrackingClient:
    """The TrackingClient of ``settings``: one per distinct settings in this process.

    Keyed by the settings' values, not the object, so the copies a config makes (and a
    settings object changed in place) find the client of what they say now.
    """
    key = (settings.uri, settings.artifact_location, settings.experiment)
    with _CLIENTS_LOCK:
        found = _CLIENTS.get(key)
        if found is None:
            found = _CLIENTS[key] = TrackingClient(settings.model_copy())
        return found


def mlflow_client(settings: TrackingSettings) -> MlflowClient:
    """The shared ``MlflowClient`` of ``settings`` (see :func:`tracking_client`)."""
    return tracking_client(settings).client


def use_store(tracking: TrackingSettings) -> None:
    """Point MLflow's process-wide tracking *and* registry URIs at ``tracking.uri``.

    Both, always: ``models:/`` URIs resolve through the registry URI. MLflow's setters
    also export ``MLFLOW_TRACKING_URI`` / ``MLFLOW_REGISTRY_URI``; the environment is
    restored afterwards, because ``load_config`` reads ``MLFLOW_TRACKING_URI`` and one
    config's store must not leak into the next config loaded by this process or its
    children.
    """
    import mlflow

    saved = {key: os.environ.get(key) for key in ("MLFLOW_TRACKING_URI", "MLFLOW_REGISTRY_URI")}
    mlflow.set_tracking_uri(tracking.uri)
    mlflow.set_registry_uri(tracking.uri)
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


def connect(tracking: TrackingSettings) -> str:
    """Point MLflow at the configured store and make sure the experiment exists.

    Returns the experiment id. The experiment's artifact location is set on creation,
    so a local store keeps its artifacts under the driftgate home, not in ./mlruns.
    """
    import mlflow

    use_store(tracking)
    experiment = mlflow.get_experiment_by_name(tracking.experiment)
    if experiment is not None:
        return experiment.experiment_id
    try:
        return mlflow.create_experiment(
            tracking.experiment, artifact_location=tracking.artifact_location
        )
    except Exception:
        # Another process may have created it between our lookup and create.
        experiment = mlflow.get_experiment_by_name(tracking.experiment)
        if experiment is None:
            raise
        return experiment.experiment_id
