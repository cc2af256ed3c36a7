"""A version's files on its run: listing, downloading and uploading artifacts."""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from pathlib import Path

from driftgate.config import TrackingSettings
from driftgate.registry.client import mlflow_client
from driftgate.registry.errors import MissingArtifactError, registry_call
from driftgate.registry.names import EXPORTS_FOLDER, ONNX_ARTIFACT, REFERENCE_PROFILE_ARTIFACT
from driftgate.registry.versions import model_version


def run_has_artifact(tracking: TrackingSettings, run_id: str, folder: str, name: str) -> bool:
    """Whether the run logged ``folder/name`` (a listing, not a failed download: a
    missing file is an answer here, an unreachable store stays an error)."""
    listed = registry_call(
        f"cannot list the {folder} artifacts of run {run_id}",
        mlflow_client(tracking).list_artifacts,
        run_id,
        folder,
    )
    return f"{folder}/{name}" in {item.path for item in listed}


def download_reference_profile(
    tracking: TrackingSettings, model_name: str, version: str, destination: Path
) -> Path:
    """Download the version's reference profile folder (for drift checks) into ``destination``."""
    import mlflow

    run_id = model_version(tracking, model_name, version).run_id
    folder = registry_call(
        f"cannot download the reference profile of {model_name} v{version}",
        mlflow.artifacts.download_artifacts,
        run_id=run_id,
        artifact_path=REFERENCE_PROFILE_ARTIFACT,
        dst_path=str(destination),
        tracking_uri=tracking.uri,
    )
    return Path(folder)


def log_exports(tracking: TrackingSettings, run_id: str, exports: Sequence[Path]) -> None:
    """Upload a version's exported models (the gate's ONNX file) to its run's
    ``exports/`` folder."""
    client = mlflow_client(tracking)
    for path in exports:
        registry_call(
            f"cannot upload {path.name} to run {run_id}",
            client.log_artifact,
            run_id,
            str(path),
            EXPORTS_FOLDER,
        )


def download_onnx_model(tracking: TrackingSettings, model_name: str, version: str) -> bytes:
    """The ONNX model the gate exported for ``version`` (``runs:/RUN/exports/model.onnx``).

    Raises:
        MissingArtifactError: The version's run has no such file: its gate did not check
            ``export_parity`` with format ``onnx`` (or the version was never gated).
    """
    import mlflow

    run_id = model_version(tracking, model_name, version).run_id
    folder, name = ONNX_ARTIFACT.rsplit("/", 1)
    if not run_id or not run_has_artifact(tracking, run_id, folder, name):
        raise MissingArtifactError(
            f"{model_name} v{version} has no ONNX model (runs:/{run_id}/{ONNX_ARTIFACT}): "
            "the gate writes it when model_checks.export_parity checks format onnx; "
            "gate the version with it, or serve with serving.backend: pyfunc"
        )
    with tempfile.TemporaryDirectory() as scratch:
        path = registry_call(
            f"cannot download the ONNX model of {model_name} v{version}",
            mlflow.artifacts.download_artifacts,
            run_id=run_id,
            artifact_path=ONNX_ARTIFACT,
            dst_path=scratch,
            tracking_uri=tracking.uri,
        )
        return Path(path).read_bytes()
