"""What a version predicts and from which features: its ``ModelSpec`` tags, written at
training, and its ``weights/architecture.json`` (training.flavour.ModelSpec), read back."""

from __future__ import annotations

import json
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from driftgate.config import TrackingSettings
from driftgate.registry.artifacts import run_has_artifact
from driftgate.registry.errors import RegistryError, registry_call
from driftgate.registry.names import (
    ARCHITECTURE_FILE,
    TAG_CLASSES,
    TAG_FEATURES,
    TAG_FLAVOUR,
    TAG_TASK,
    WEIGHTS_FOLDER,
)
from driftgate.registry.versions import is_adopted, model_version, version_features, version_task
from driftgate.training.features import FeatureSpec, numeric_specs


def spec_tags(model_spec: Mapping[str, Any] | None) -> dict[str, str]:
    if model_spec is None:
        return {}
    tags = {
        TAG_TASK: str(model_spec.get("task", "binary")),
        TAG_FLAVOUR: str(model_spec.get("flavour", "builtin")),
    }
    if model_spec.get("classes"):
        tags[TAG_CLASSES] = json.dumps(list(model_spec["classes"]))
    return tags


def load_model_spec(tracking: TrackingSettings, model_name: str, version: str) -> dict:
    """The version's ``weights/architecture.json`` (training.flavour.ModelSpec.from_dict
    reads it, old versions included): task, flavour, feature specs, classes."""
    import mlflow

    run_id = model_version(tracking, model_name, version).run_id
    with tempfile.TemporaryDirectory() as scratch:
        path = registry_call(
            f"cannot download the architecture of {model_name} v{version}",
            mlflow.artifacts.download_artifacts,
            run_id=run_id,
            artifact_path=f"{WEIGHTS_FOLDER}/{ARCHITECTURE_FILE}",
            dst_path=scratch,
            tracking_uri=tracking.uri,
        )
        text = Path(path).read_text()
    try:
        spec = json.loads(text)
    except ValueError as exc:
        raise RegistryError(f"{model_name} v{version}: {ARCHITECTURE_FILE} is not JSON") from exc
    if not isinstance(spec, dict):
        raise RegistryError(f"{model_name} v{version}: {ARCHITECTURE_FILE} is not an object")
    return spec


def version_outputs(
    tracking: TrackingSettings, model_name: str, version: str
) -> tuple[str, tuple[str, ...]]:
    """What a version predicts: its task and (multiclass) class labels, from its tags.

    A version without a ``driftgate.task`` tag (logged before tasks, or not by
    driftgate) is binary. Labels too long for one tag are read from architecture.json.
    """
    tags = model_version(tracking, model_name, version).tags
    task = version_task(tags)
    if task != "multiclass":
        return task, ()
    try:
        classes = json.loads(tags.get(TAG_CLASSES, ""))
    except ValueError:  # cut at TAG_VALUE_MAX_CHARS
        classes = load_model_spec(tracking, model_name, version).get("classes", [])
    return task, tuple(str(c) for c in classes)


def version_feature_specs(
    tracking: TrackingSettings, model_name: str, version: str
) -> list[FeatureSpec]:
    """The version's features with their kinds and categories, in model order: the
    ``features`` of its ``weights/architecture.json`` (the ModelSpec training wrote).

    A version without one (adopted, registered from files, or logged before feature
    kinds) has numeric features only: its ``driftgate.features`` tag.
    """
    features = version_features(tracking, model_name, version)
    found = model_version(tracking, model_name, version)
    if not found.run_id or is_adopted(found.tags):
        return numeric_specs(features)
    if not run_has_artifact(tracking, found.run_id, WEIGHTS_FOLDER, ARCHITECTURE_FILE):
        return numeric_specs(features)  # a model registered from files, not trained here
    spec = load_model_spec(tracking, model_name, version)
    if "flavour" not in spec or not spec.get("features"):
        return numeric_specs(features)
    try:
        specs = [FeatureSpec.from_dict(item) for item in spec["features"]]
    except (ValueError, KeyError, TypeError) as exc:
        raise RegistryError(
            f"{model_name} v{version}: unreadable features in {ARCHITECTURE_FILE}: {exc}"
        ) from None
    if [item.name for item in specs] != list(features):
        raise RegistryError(
            f"{model_name} v{version}: {ARCHITECTURE_FILE} does not list the "
            f"{TAG_FEATURES} features in their order"
        )
    return specs
