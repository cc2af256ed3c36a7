"""The one way a model or its weights are loaded: downloaded once, judged by
:mod:`driftgate.modelguard` before any byte is deserialised, loaded from that folder."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from driftgate import modelguard
from driftgate.config import TrackingSettings
from driftgate.registry.client import use_store
from driftgate.registry.errors import RegistryError, registry_call


class UnsafeModelError(RegistryError):
    """A model or weights folder is outside the allow-list of :mod:`driftgate.modelguard`.

    Raised before any byte of it is deserialised; names the model, each refused file and
    why.
    """

    def __init__(self, label: str, findings: list[modelguard.Finding]) -> None:
        self.label = label
        self.findings = tuple(findings)
        kind = (
            "a pickled model"
            if any(f.pickled for f in findings)
            else "a model outside the allow-list"
        )
        super().__init__(
            f"{label}: refusing to load {kind}: {modelguard.describe(findings)}. "
            # What to do instead: how to log a model of each format in the allow-list.
            f"{modelguard.formats.how_to_log_loadable()}"
        )


class OnnxPyfunc:
    """The pyfunc of a format whose MLflow wrapper answers a dict of named outputs (ONNX:
    ``ModelFormat.outputs_by_name``), answering as a torch one does: ``predict`` takes a
    float32 matrix (or a frame) and returns the model's first output as an array."""

    def __init__(self, pyfunc: Any) -> None:
        self.pyfunc = pyfunc
        self.metadata = pyfunc.metadata

    def predict(self, data: Any) -> Any:
        outputs = self.pyfunc.predict(np.asarray(data, dtype=np.float32))
        return next(iter(outputs.values())) if isinstance(outputs, dict) else outputs


def load_pyfunc(tracking: TrackingSettings, model_uri: str):
    """Load a registered model (``models:/NAME/VERSION`` or ``models:/NAME@alias``).

    The model's files are downloaded once, checked against the allow-list and loaded
    from that same folder (nothing is fetched between the check and the load). Only an
    MLflow PyTorch model in the ``pt2`` format (``torch.export``) or an MLflow ONNX model
    passes; anything else, such as a version logged with ``serialization_format="pickle"``
    or a cloudpickled pyfunc beside a genuine ``model.pt2``, raises UnsafeModelError.
    """
    import mlflow

    use_store(tracking)
    with tempfile.TemporaryDirectory() as scratch:
        local = Path(mlflow.artifacts.download_artifacts(artifact_uri=model_uri, dst_path=scratch))
        return load_checked_model(local, model_uri)


def load_checked_model(folder: Path, label: str):
    """The one place a model is loaded: the allow-list on ``folder``, then pyfunc from it.

    ``label`` names the model in a refusal (a ``models:/`` URI, or a path for a model
    that does not come from the registry).
    """
    import mlflow

    refuse_unsafe_model(folder, label)
    pyfunc = mlflow.pyfunc.load_model(str(folder))
    # The folder passed, so a format claimed it; what its pyfunc answers is the format's.
    model_format = modelguard.format_of(folder)
    return OnnxPyfunc(pyfunc) if model_format and model_format.outputs_by_name else pyfunc


def refuse_unsafe_model(folder: Path, label: str) -> None:
    """Raise UnsafeModelError unless ``folder`` passes :func:`modelguard.inspect_model_folder`."""
    findings = modelguard.inspect_model_folder(Path(folder))
    if findings:
        raise UnsafeModelError(label, findings)  # callers log it: the service, the CLI


def load_weights(tracking: TrackingSettings, run_id: str) -> tuple[dict, dict]:
    """The run's ``architecture.json`` and state dict, loaded with ``weights_only=True``
    once the folder passes :func:`modelguard.inspect_weights_folder`."""
    import mlflow
    import torch

    with tempfile.TemporaryDirectory() as scratch:
        folder = registry_call(
            f"cannot download the weights of run {run_id}",
            mlflow.artifacts.download_artifacts,
            run_id=run_id,
            artifact_path="weights",
            dst_path=scratch,
            tracking_uri=tracking.uri,
        )
        findings = modelguard.inspect_weights_folder(Path(folder))
        if findings:
            raise UnsafeModelError(f"the weights of run {run_id}", findings)
        architecture = json.loads((Path(folder) / "architecture.json").read_text())
        state = torch.load(Path(folder) / "state_dict.pt", weights_only=True)
    return architecture, state


def load_adoptable_model(tracking: TrackingSettings, model_uri: str) -> tuple[Any, dict]:
    """The pyfunc of ``model_uri`` and its ``MLmodel`` (a mapping), after the allow-list.

    The same path every load takes (:func:`load_checked_model`): downloaded once,
    judged by :mod:`driftgate.modelguard` before any byte is deserialised, loaded from
    that folder. UnsafeModelError (exit 3) names each refused file.
    """
    import mlflow

    use_store(tracking)
    with tempfile.TemporaryDirectory() as scratch:
        local = Path(
            registry_call(
                f"cannot download {model_uri}",
                mlflow.artifacts.download_artifacts,
                artifact_uri=model_uri,
                dst_path=scratch,
            )
        )
        pyfunc = load_checked_model(local, model_uri)  # the allow-list first
        import yaml

        mlmodel = yaml.safe_load((local / modelguard.MLMODEL).read_text()) or {}
        return pyfunc, mlmodel
