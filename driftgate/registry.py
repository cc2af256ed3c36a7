"""The one module that talks to MLflow (tracking and model registry).

Everything else in driftgate hands plain values to these functions; swapping the
local SQLite store for a tracking server is a change of URI, not of code.

One way for each thing written to MLflow:
- clients: :func:`_client` (tracking *and* registry URI of the given settings), never
  the process-wide default;
- text (params, tags): :func:`_text`, credentials masked, cut to TAG_VALUE_MAX_CHARS
  where MLflow's SQL stores would refuse more;
- non-finite numbers: a NaN metric is not logged (MLflow would store a flag that its
  charts draw as a gap); in params and tags a non-finite float is spelled by ``str()``
  (``nan``, ``inf``, ``-inf``), also inside JSON-encoded lists and mappings.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import tempfile
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from driftgate import modelguard
from driftgate.config import TrackingSettings
from driftgate.core.errors import EXIT_BACKEND, EXIT_USAGE, DriftgateError
from driftgate.core.redaction import redact_credentials
from driftgate.training.features import FeatureSpec, numeric_specs

log = logging.getLogger(__name__)

# Tags every model version carries, so the MLflow UI and later gates can read them.
TAG_DATA_DIGEST = "driftgate.data.train_digest"
TAG_FEATURES = "driftgate.features"
TAG_GIT_COMMIT = "driftgate.git_commit"
TAG_RUN_KIND = "driftgate.run_kind"
# What the version predicts and how it was built (training.flavour.ModelSpec): the task
# (binary | multiclass | regression), the flavour (builtin | factory) and, for
# multiclass, the class labels in output order (JSON list). The whole spec, feature
# kinds and categories included, is the run's weights/architecture.json
# (load_model_spec).
TAG_TASK = "driftgate.task"
TAG_FLAVOUR = "driftgate.flavour"
TAG_CLASSES = "driftgate.classes"
WEIGHTS_FOLDER = "weights"
ARCHITECTURE_FILE = "architecture.json"
# Written last by log_training_run: a version without it was cut off mid-registration.
TAG_REGISTRATION = "driftgate.registration"
REGISTRATION_COMPLETE = "complete"
# The DVC data version of the training data, on the run and on the model version: the
# MD5 DVC records for the file in dvc.lock, and that file's path in the project.
TAG_DVC_DATA_MD5 = "dvc.data_md5"
TAG_DVC_DATA_PATH = "dvc.data_path"


# registered_model_tags.value is VARCHAR(5000) in MLflow's SQL stores (run tags allow
# 8000, version tags more): tag values are cut to the tightest, everywhere.
TAG_VALUE_MAX_CHARS = 5000


class RegistryError(DriftgateError, RuntimeError):
    """The tracking store or registry refused or failed an operation.

    The message never holds credentials: MLflow quotes the URL it failed on, and a
    tracking URI may carry ``user:password@``.
    """

    exit_code = EXIT_BACKEND

    def __init__(self, message: str) -> None:
        super().__init__(redact_credentials(str(message)))


@dataclass(frozen=True)
class RegisteredVersion:
    model_name: str
    version: str
    run_id: str
    experiment_id: str
    model_uri: str  # models:/NAME/VERSION


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


def _pip_requirements() -> list[str]:
    """Pin what the logged model needs; also spares MLflow's slow requirement inference."""
    from importlib.metadata import version

    torch_version = version("torch").split("+")[0]  # drop the local label (+cpu)
    return [f"torch=={torch_version}", f"mlflow=={version('mlflow')}", f"numpy=={version('numpy')}"]


def log_training_run(
    tracking: TrackingSettings,
    model_name: str,
    model: Any,
    *,
    params: Mapping[str, Any],
    history: list[Mapping[str, float]],
    metrics: Mapping[str, float],
    environment: Mapping[str, str],
    training_data: pd.DataFrame,
    data_source: str,
    data_digest: str,
    data_md5: str,
    data_path: str,
    input_example: np.ndarray,
    features: list[str],
    model_spec: Mapping[str, Any] | None = None,
    weights_writer: Any = None,
    artifacts: Mapping[str, Path] | None = None,
    description: str = "",
) -> RegisteredVersion:
    """Log one training run and register its model as a new version of ``model_name``.

    Logged: params, per-epoch metrics (``history``, step = epoch), final metrics, the
    environment (as ``env.*`` tags and ``environment.json``), the exact training data
    as a dataset input with its content digest, its DVC data version (``data_md5`` of
    the file ``data_path``, as ``dvc.*`` tags on run and version), the model
    (torch.export format, which loads without unpickling code) with signature and input
    example, its state dict (for ``weights_only=True`` reloads) and any extra
    ``artifacts`` (name -> file). ``weights_writer(folder)`` (the model flavour's
    ``save``) writes the weights folder; ``model_spec`` (its ``architecture.json``)
    gives the task, flavour and classes tags.
    Aliases are left alone: only the promotion gate moves them.
    """
    import mlflow
    import torch

    experiment_id = connect(tracking)
    with mlflow.start_run(experiment_id=experiment_id) as run:
        run_id = run.info.run_id
        data_version = {TAG_DVC_DATA_MD5: data_md5, TAG_DVC_DATA_PATH: data_path}
        mlflow.set_tags(
            {
                TAG_RUN_KIND: "train",
                **data_version,
                **{f"env.{k}": _text(v) for k, v in environment.items()},
            }
        )
        mlflow.log_params({k: _param_value(v) for k, v in params.items()})
        for step, epoch_metrics in enumerate(history, start=1):
            mlflow.log_metrics(_loggable_metrics(epoch_metrics), step=step)
        mlflow.log_metrics(_loggable_metrics(metrics))
        mlflow.log_dict(dict(environment), "environment.json")
        with _quiet_dataset_warnings():
            dataset = mlflow.data.from_pandas(
                training_data, source=data_source, name="train", digest=data_digest
            )
            mlflow.log_input(dataset, context="training")
        with tempfile.TemporaryDirectory() as scratch:
            if weights_writer is not None:
                mlflow.log_artifacts(
                    str(weights_writer(Path(scratch) / WEIGHTS_FOLDER)),
                    artifact_path=WEIGHTS_FOLDER,
                )
            else:
                state_path = Path(scratch) / "state_dict.pt"
                torch.save(model.state_dict(), state_path)
                mlflow.log_artifact(str(state_path), artifact_path=WEIGHTS_FOLDER)
                mlflow.log_dict(model.architecture(), f"{WEIGHTS_FOLDER}/{ARCHITECTURE_FILE}")
        for name, path in (artifacts or {}).items():
            if Path(path).is_dir():
                mlflow.log_artifacts(str(path), artifact_path=name)
            else:
                mlflow.log_artifact(str(path), artifact_path=name)
        info = mlflow.pytorch.log_model(
            model,
            name="model",
            input_example=input_example,
            registered_model_name=model_name,
            pip_requirements=_pip_requirements(),
            # Explicit: MLflow's default turns to pickle on Databricks URIs, and
            # load_pyfunc refuses pickled models.
            serialization_format="pt2",
        )
    version = str(info.registered_model_version)
    client = _client(tracking)
    tags = {
        TAG_DATA_DIGEST: data_digest,
        **data_version,
        TAG_FEATURES: json.dumps(features),
        **_spec_tags(model_spec),
        TAG_GIT_COMMIT: environment.get("git_commit", "unknown"),
        **{k: f"{v:.6g}" for k, v in metrics.items()},
    }
    where = f"{model_name} v{version} registered but not completed"
    for key, value in tags.items():
        _registry_call(
            where,
            client.set_model_version_tag,
            model_name,
            version,
            key,
            _text(value),
        )
    if description:
        _registry_call(
            where, client.update_model_version, model_name, version, description=description
        )
    # Last, so that a registry failure anywhere above leaves a version without it: such
    # a half-registered version is never chosen as a candidate (latest_version).
    _registry_call(
        where,
        client.set_model_version_tag,
        model_name,
        version,
        TAG_REGISTRATION,
        REGISTRATION_COMPLETE,
    )
    return RegisteredVersion(
        model_name=model_name,
        version=version,
        run_id=run_id,
        experiment_id=experiment_id,
        model_uri=f"models:/{model_name}/{version}",
    )


def _spec_tags(model_spec: Mapping[str, Any] | None) -> dict[str, str]:
    if model_spec is None:
        return {}
    tags = {
        TAG_TASK: str(model_spec.get("task", "binary")),
        TAG_FLAVOUR: str(model_spec.get("flavour", "builtin")),
    }
    if model_spec.get("classes"):
        tags[TAG_CLASSES] = json.dumps(list(model_spec["classes"]))
    return tags


def version_task(version_tags: Mapping[str, str]) -> str:
    """A version's task (tag ``driftgate.task``); versions logged before tasks are binary."""
    return version_tags.get(TAG_TASK, "binary")


def _model_version(tracking: TrackingSettings, model_name: str, version: str):
    return _registry_call(
        f"cannot read {model_name} v{version}",
        _client(tracking).get_model_version,
        model_name,
        version,
    )


def version_outputs(
    tracking: TrackingSettings, model_name: str, version: str
) -> tuple[str, tuple[str, ...]]:
    """What a version predicts: its task and (multiclass) class labels, from its tags.

    A version without a ``driftgate.task`` tag (logged before tasks, or not by
    driftgate) is binary. Labels too long for one tag are read from architecture.json.
    """
    tags = _model_version(tracking, model_name, version).tags
    task = version_task(tags)
    if task != "multiclass":
        return task, ()
    try:
        classes = json.loads(tags.get(TAG_CLASSES, ""))
    except ValueError:  # cut at TAG_VALUE_MAX_CHARS
        classes = load_model_spec(tracking, model_name, version).get("classes", [])
    return task, tuple(str(c) for c in classes)


def _run_has_artifact(tracking: TrackingSettings, run_id: str, folder: str, name: str) -> bool:
    """Whether the run logged ``folder/name`` (a listing, not a failed download: a
    missing file is an answer here, an unreachable store stays an error)."""
    from mlflow import MlflowClient

    client = MlflowClient(tracking_uri=tracking.uri, registry_uri=tracking.uri)
    listed = _registry_call(
        f"cannot list the {folder} artifacts of run {run_id}",
        client.list_artifacts,
        run_id,
        folder,
    )
    return f"{folder}/{name}" in {item.path for item in listed}


def load_model_spec(tracking: TrackingSettings, model_name: str, version: str) -> dict:
    """The version's ``weights/architecture.json`` (training.flavour.ModelSpec.from_dict
    reads it, old versions included): task, flavour, feature specs, classes."""
    import mlflow

    run_id = _model_version(tracking, model_name, version).run_id
    with tempfile.TemporaryDirectory() as scratch:
        path = _registry_call(
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


# MLflow warns on every training run about things that are not the user's to fix:
# a local path matches its two local-file dataset sources (both the same class), and
# the training data's schema has integer columns (the dataset is a record of the data,
# not the model's signature, which is float32). Only these two, only around the call.
_MLFLOW_DATASET_NOISE = (
    r"The specified dataset source can be interpreted in multiple ways",
    r"Hint: Inferred schema contains integer column",
)


@contextlib.contextmanager
def _quiet_dataset_warnings():
    with warnings.catch_warnings():
        for message in _MLFLOW_DATASET_NOISE:
            warnings.filterwarnings("ignore", message=message, category=UserWarning)
        yield


def _param_value(value: Any) -> str | int | float | bool:
    if isinstance(value, int | float | bool) and not _non_finite(value):
        return value
    return _text(value)


def _text(value: Any, limit: int | None = None) -> str:
    """A param or tag value: scalars by ``str()``, anything else (lists, mappings, None)
    as JSON; non-finite floats spelled ``nan``/``inf``/``-inf`` either way; credentials
    masked."""
    if isinstance(value, str | int | float | bool):
        text = str(value)
    else:
        text = json.dumps(_spell_non_finite(value))
    return redact_credentials(text)[:limit]


def _non_finite(value: Any) -> bool:
    return isinstance(value, float) and not math.isfinite(value)


def _spell_non_finite(value: Any) -> Any:
    if _non_finite(value):
        return str(value)
    if isinstance(value, Mapping):
        return {k: _spell_non_finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_spell_non_finite(v) for v in value]
    return value


def _loggable_metrics(metrics: Mapping[str, float]) -> dict[str, float]:
    """The metrics to log: a NaN one is left out (see the module docstring)."""
    return {k: v for k, v in metrics.items() if not (isinstance(v, float) and math.isnan(v))}


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
            f"{label}: refusing to load {kind}: {modelguard.describe(findings)}. {LOADABLE}"
        )


# What to do instead, in every refusal of a model folder.
LOADABLE = (
    "driftgate loads nothing that unpickles: log a PyTorch model with "
    "mlflow.pytorch.log_model (pt2, the default), any other model as ONNX with "
    "mlflow.onnx.log_model (e.g. skl2onnx for scikit-learn)"
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


def run_metrics(tracking: TrackingSettings, run_id: str) -> dict[str, float]:
    return dict(_client(tracking).get_run(run_id).data.metrics)


CHAMPION_ALIAS = "champion"
PREVIOUS_CHAMPION_ALIAS = "previous-champion"


def version_test_metric(
    tracking: TrackingSettings, model_name: str, version: str, metric: str
) -> float | None:
    """The version's gate-time test metric ``test_<metric>``: its version tag if it has
    one, else its run's metric (logged by training and adoption); None when neither."""
    key = f"test_{metric}"
    found = _model_version(tracking, model_name, version)
    tagged = found.tags.get(key)
    if tagged is not None:
        try:
            return float(tagged)
        except ValueError:
            pass  # a tag that is not a number: fall back to the run's metric
    run = _registry_call(f"cannot read run {found.run_id}", _client(tracking).get_run, found.run_id)
    value = run.data.metrics.get(key)
    return None if value is None else float(value)


def alias_version(tracking: TrackingSettings, model_name: str, alias: str) -> str | None:
    """The version an alias points at, or None when the alias (or model) does not exist."""
    from mlflow.exceptions import MlflowException

    client = _client(tracking)
    try:
        aliases = client.get_registered_model(model_name).aliases
    except MlflowException as exc:
        if exc.error_code == "RESOURCE_DOES_NOT_EXIST":
            return None
        raise RegistryError(f"cannot read model '{model_name}': {exc.message}") from exc
    version = aliases.get(alias)
    return str(version) if version is not None else None


def version_features(tracking: TrackingSettings, model_name: str, version: str) -> list[str]:
    """Feature order the version was trained with (its ``driftgate.features`` tag)."""
    tags = _client(tracking).get_model_version(model_name, version).tags
    if TAG_FEATURES not in tags:
        raise RegistryError(f"{model_name} v{version} has no {TAG_FEATURES} tag")
    return json.loads(tags[TAG_FEATURES])


def version_feature_specs(
    tracking: TrackingSettings, model_name: str, version: str
) -> list[FeatureSpec]:
    """The version's features with their kinds and categories, in model order: the
    ``features`` of its ``weights/architecture.json`` (the ModelSpec training wrote).

    A version without one (adopted, registered from files, or logged before feature
    kinds) has numeric features only: its ``driftgate.features`` tag.
    """
    features = version_features(tracking, model_name, version)
    model_version = _model_version(tracking, model_name, version)
    if not model_version.run_id or is_adopted(model_version.tags):
        return numeric_specs(features)
    if not _run_has_artifact(tracking, model_version.run_id, WEIGHTS_FOLDER, ARCHITECTURE_FILE):
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


# Gate results, on the candidate version and on its run (docs/mlflow_ui.md lists them).
TAG_GATE_PREFIX = "driftgate.gate."  # + check name: "PASS: observed (threshold)"
TAG_GATE_STATUS = "driftgate.gate.status"  # passed | failed
TAG_GATE_FAILED_CHECKS = "driftgate.gate.failed_checks"  # comma-separated, "-" when none
# Checks that did not apply to the candidate (comma-separated, "-" when none).
TAG_GATE_NOT_APPLICABLE = "driftgate.gate.not_applicable_checks"
TAG_GATE_CHAMPION = "driftgate.gate.champion_at_evaluation"  # version or "none"
TAG_GATE_EVALUATED_AT = "driftgate.gate.evaluated_at"  # UTC, ISO 8601
TAG_GATE_REPORT = "driftgate.gate.report"  # runs:/RUN/gates/gate.md
TAG_PROMOTION_STATUS = "driftgate.promotion.status"  # pending | promoted | aborted
TAG_PROMOTION_PREVIOUS = "driftgate.promotion.previous_champion"
TAG_PROMOTED_AT = "driftgate.promotion.promoted_at"
TAG_ROLLED_BACK_AT = "driftgate.rollback.at"
TAG_ROLLBACK_REASON = "driftgate.rollback.reason"
NO_VERSION = "none"

# Labelled paragraphs of a version's description, below the training summary; each is
# replaced, never stacked, when its step runs again (a re-run gate, a new promotion).
DESCRIPTION_GATE = "Gate"
DESCRIPTION_PROMOTION = "Promotion"
DESCRIPTION_ROLLBACK = "Rollback"
# model_versions.description is VARCHAR(5000) in MLflow's SQL stores (PostgreSQL enforces it).
DESCRIPTION_MAX_CHARS = 5000


@dataclass(frozen=True)
class VersionInfo:
    model_name: str
    version: str
    run_id: str
    experiment_id: str  # the run's experiment
    version_tags: dict[str, str]
    run_metrics: dict[str, float]
    run_tags: dict[str, str]
    signature_inputs: list[dict] | None

    @property
    def environment(self) -> dict[str, str]:
        return {k.removeprefix("env."): v for k, v in self.run_tags.items() if k.startswith("env.")}


def _client(tracking: TrackingSettings):
    from mlflow import MlflowClient

    # Artifact downloads draw tqdm bars on stderr; CI logs want the gate table instead.
    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")

    return MlflowClient(tracking_uri=tracking.uri, registry_uri=tracking.uri)


def _registry_call(what: str, call, *args, **kwargs):
    """Run one registry call; any failure becomes a RegistryError saying what failed."""
    try:
        return call(*args, **kwargs)
    except RegistryError:
        raise
    except Exception as exc:  # MlflowException, connection errors, timeouts...
        message = getattr(exc, "message", None) or str(exc)
        raise RegistryError(f"{what}: {message}") from exc


def latest_version(tracking: TrackingSettings, model_name: str) -> str:
    """The newest completely registered version (see TAG_REGISTRATION); versions cut
    off mid-registration are skipped, with a warning naming them."""
    versions = _registry_call(
        f"cannot list versions of '{model_name}'",
        _client(tracking).search_model_versions,
        f"name='{model_name}'",
    )
    complete = [int(v.version) for v in versions if is_complete(v.tags)]
    incomplete = sorted(int(v.version) for v in versions if not is_complete(v.tags))
    if incomplete and (not complete or max(incomplete) > max(complete)):
        log.warning(
            "skipping %s v%s: registration did not complete (no %s tag)",
            model_name,
            ", v".join(map(str, incomplete)),
            TAG_REGISTRATION,
        )
    if not complete:
        half = f" ({len(incomplete)} half-registered)" if incomplete else ""
        raise RegistryError(
            f"model '{model_name}' has no completely registered version{half}; "
            "run `driftgate train`"
        )
    return str(max(complete))


def is_complete(version_tags: Mapping[str, str]) -> bool:
    """Whether a version's registration ran to its end (its last tag is present)."""
    return version_tags.get(TAG_REGISTRATION) == REGISTRATION_COMPLETE


def version_info(tracking: TrackingSettings, model_name: str, version: str) -> VersionInfo:
    import mlflow

    client = _client(tracking)
    model_version = _registry_call(
        f"cannot read {model_name} v{version}", client.get_model_version, model_name, version
    )
    run = _registry_call(
        f"cannot read run {model_version.run_id}", client.get_run, model_version.run_id
    )
    use_store(tracking)
    info = _registry_call(
        f"cannot read the model of {model_name} v{version}",
        mlflow.models.get_model_info,
        f"models:/{model_name}/{version}",
    )
    signature = info.signature.inputs.to_dict() if info.signature is not None else None
    return VersionInfo(
        model_name=model_name,
        version=str(version),
        run_id=model_version.run_id,
        experiment_id=run.info.experiment_id,
        version_tags=dict(model_version.tags),
        run_metrics=dict(run.data.metrics),
        run_tags=dict(run.data.tags),
        signature_inputs=signature,
    )


def load_weights(tracking: TrackingSettings, run_id: str) -> tuple[dict, dict]:
    """The run's ``architecture.json`` and state dict, loaded with ``weights_only=True``
    once the folder passes :func:`modelguard.inspect_weights_folder`."""
    import mlflow
    import torch

    with tempfile.TemporaryDirectory() as scratch:
        folder = _registry_call(
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


def record_gate_result(
    tracking: TrackingSettings,
    model_name: str,
    version: str,
    run_id: str,
    check_tags: Mapping[str, str],
    report_files: Mapping[str, Path],
    artifact_folder: str,
    verdict: str,
    exports: Sequence[Path] = (),
) -> None:
    """Record a gate evaluation where the MLflow UI shows it.

    The report files go to the run's ``artifact_folder`` first, so a report tag never
    points at a missing file, and the checks' ``exports`` (the ONNX model) to its
    ``exports/`` folder; then ``check_tags`` go on the version (its page) *and* on
    its run (the runs compare view lines versions up by run tags); last, ``verdict``
    becomes the version description's Gate paragraph.
    """
    client = _client(tracking)
    for path in report_files.values():
        _registry_call(
            f"cannot upload {path.name} to run {run_id}",
            client.log_artifact,
            run_id,
            str(path),
            artifact_folder,
        )
    log_exports(tracking, run_id, exports)
    tag_model_version(tracking, model_name, version, check_tags)
    for key, value in check_tags.items():
        _registry_call(
            f"cannot tag run {run_id}",
            client.set_tag,
            run_id,
            key,
            _text(value, TAG_VALUE_MAX_CHARS),
        )
    set_description_paragraph(tracking, model_name, version, DESCRIPTION_GATE, verdict)


EXPORTS_FOLDER = "exports"  # the gate's exports of a version, on its run
ONNX_ARTIFACT = f"{EXPORTS_FOLDER}/model.onnx"  # export_parity with format onnx


class MissingArtifactError(RegistryError):
    """A version lacks an artifact something needs (the ONNX model for the onnxruntime
    serving backend); the message names the artifact and how it is made."""


def log_exports(tracking: TrackingSettings, run_id: str, exports: Sequence[Path]) -> None:
    """Upload a version's exported models (the gate's ONNX file) to its run's
    ``exports/`` folder."""
    client = _client(tracking)
    for path in exports:
        _registry_call(
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

    run_id = _model_version(tracking, model_name, version).run_id
    folder, name = ONNX_ARTIFACT.rsplit("/", 1)
    if not run_id or not _run_has_artifact(tracking, run_id, folder, name):
        raise MissingArtifactError(
            f"{model_name} v{version} has no ONNX model (runs:/{run_id}/{ONNX_ARTIFACT}): "
            "the gate writes it when model_checks.export_parity checks format onnx; "
            "gate the version with it, or serve with serving.backend: pyfunc"
        )
    with tempfile.TemporaryDirectory() as scratch:
        path = _registry_call(
            f"cannot download the ONNX model of {model_name} v{version}",
            mlflow.artifacts.download_artifacts,
            run_id=run_id,
            artifact_path=ONNX_ARTIFACT,
            dst_path=scratch,
            tracking_uri=tracking.uri,
        )
        return Path(path).read_bytes()


def with_paragraph(description: str | None, label: str, text: str) -> str:
    """``description`` with its ``**label:**`` paragraph replaced in place (or appended).

    Other paragraphs (the training summary first) are kept; the new text is cut to keep
    the whole within DESCRIPTION_MAX_CHARS.
    """
    marker = f"**{label}:**"
    paragraphs = [p for p in (description or "").split("\n\n") if p.strip()]
    others = sum(len(p) + 2 for p in paragraphs if not p.startswith(marker))
    room = DESCRIPTION_MAX_CHARS - others - len(marker) - 1
    if len(text) > room:
        text = text[: max(room - 1, 0)] + "…"
    paragraph = f"{marker} {text}"
    for index, existing in enumerate(paragraphs):
        if existing.startswith(marker):
            paragraphs[index] = paragraph
            break
    else:
        paragraphs.append(paragraph)
    return "\n\n".join(paragraphs)[:DESCRIPTION_MAX_CHARS]


def set_description_paragraph(
    tracking: TrackingSettings, model_name: str, version: str, label: str, text: str
) -> None:
    """Write the ``**label:**`` paragraph of the version's description (see with_paragraph)."""
    client = _client(tracking)
    current = _registry_call(
        f"cannot read {model_name} v{version}", client.get_model_version, model_name, version
    ).description
    _registry_call(
        f"cannot update the description of {model_name} v{version}",
        client.update_model_version,
        model_name,
        version,
        description=with_paragraph(current, label, redact_credentials(text)),
    )


def move_champion(
    tracking: TrackingSettings, model_name: str, candidate: str, expected_champion: str | None
) -> str | None:
    """Make ``candidate`` the champion and the old champion ``previous-champion``.

    All or nothing, as far as a registry without transactions allows:
    1. the candidate is tagged with the champion it replaces (harmless if we stop here);
    2. ``champion`` moves in one atomic call — the decisive write;
    3. ``previous-champion`` moves; if that fails, ``champion`` is moved back.
    If the champion changed since the gate evaluated (``expected_champion``), nothing
    is written: another promotion won, and this one must be re-evaluated.
    Returns the previous champion's version (or None).
    """
    client = _client(tracking)
    try:
        current = alias_version(tracking, model_name, CHAMPION_ALIAS)
    except RegistryError as exc:
        raise RegistryError(f"{exc}; aliases unchanged") from exc
    if current != expected_champion:
        raise RegistryError(
            f"champion of '{model_name}' moved from {expected_champion or 'none'} to "
            f"{current or 'none'} while the gate ran; aliases unchanged, re-run the gate"
        )
    _registry_call(
        f"cannot tag {model_name} v{candidate}; aliases unchanged",
        lambda: (
            client.set_model_version_tag(
                model_name, candidate, TAG_PROMOTION_PREVIOUS, current or NO_VERSION
            ),
            client.set_model_version_tag(model_name, candidate, TAG_PROMOTION_STATUS, "pending"),
        ),
    )
    _registry_call(
        f"cannot move '{CHAMPION_ALIAS}' to v{candidate}; aliases unchanged",
        client.set_registered_model_alias,
        model_name,
        CHAMPION_ALIAS,
        candidate,
    )
    if current is not None:
        try:
            client.set_registered_model_alias(model_name, PREVIOUS_CHAMPION_ALIAS, current)
        except Exception as exc:
            try:
                client.set_registered_model_alias(model_name, CHAMPION_ALIAS, current)
            except Exception as undo_exc:
                raise RegistryError(
                    f"moved '{CHAMPION_ALIAS}' to v{candidate} but could not set "
                    f"'{PREVIOUS_CHAMPION_ALIAS}' ({exc}) nor move '{CHAMPION_ALIAS}' back to "
                    f"v{current} ({undo_exc}); v{candidate} carries tag "
                    f"{TAG_PROMOTION_PREVIOUS}={current} for `driftgate rollback`"
                ) from exc
            raise RegistryError(
                f"could not set '{PREVIOUS_CHAMPION_ALIAS}' to v{current} ({exc}); "
                f"'{CHAMPION_ALIAS}' moved back to v{current}, aliases unchanged"
            ) from exc
    promoted_at = _now()
    replacing = f"replacing v{current}" if current is not None else "the first champion"
    _registry_call(
        f"aliases moved, but cannot record the promotion on v{candidate}",
        lambda: (
            client.set_model_version_tag(model_name, candidate, TAG_PROMOTION_STATUS, "promoted"),
            client.set_model_version_tag(model_name, candidate, TAG_PROMOTED_AT, promoted_at),
        ),
    )
    set_description_paragraph(
        tracking,
        model_name,
        candidate,
        DESCRIPTION_PROMOTION,
        f"promoted to `{CHAMPION_ALIAS}` {promoted_at}, {replacing}.",
    )
    return current


def rollback_champion(tracking: TrackingSettings, model_name: str, reason: str) -> tuple[str, str]:
    """Move ``champion`` back to ``previous-champion``; returns (demoted, restored).

    ``previous-champion`` then points at the version the restored one had replaced (as
    recorded when it was promoted), or is removed, so repeated rollbacks walk back in
    history instead of flip-flopping between two versions.
    """
    client = _client(tracking)
    current = alias_version(tracking, model_name, CHAMPION_ALIAS)
    if current is None:
        raise RegistryError(f"model '{model_name}' has no champion to roll back")
    previous_alias = alias_version(tracking, model_name, PREVIOUS_CHAMPION_ALIAS)
    previous = previous_alias
    if previous is None:
        recorded = _registry_call(
            f"cannot read {model_name} v{current}", client.get_model_version, model_name, current
        ).tags.get(TAG_PROMOTION_PREVIOUS, NO_VERSION)
        previous = None if recorded == NO_VERSION else recorded
    if previous is None:
        raise RegistryError(f"model '{model_name}' has no previous champion to roll back to")
    before_previous = _registry_call(
        f"cannot read {model_name} v{previous}", client.get_model_version, model_name, previous
    ).tags.get(TAG_PROMOTION_PREVIOUS, NO_VERSION)
    _registry_call(
        f"cannot move '{CHAMPION_ALIAS}' back to v{previous}; aliases unchanged",
        client.set_registered_model_alias,
        model_name,
        CHAMPION_ALIAS,
        previous,
    )
    if before_previous == NO_VERSION and previous_alias is not None:
        _registry_call(
            f"champion restored to v{previous}, but cannot remove '{PREVIOUS_CHAMPION_ALIAS}'",
            client.delete_registered_model_alias,
            model_name,
            PREVIOUS_CHAMPION_ALIAS,
        )
    elif before_previous != NO_VERSION:
        _registry_call(
            f"champion restored to v{previous}, but cannot move '{PREVIOUS_CHAMPION_ALIAS}'",
            client.set_registered_model_alias,
            model_name,
            PREVIOUS_CHAMPION_ALIAS,
            before_previous,
        )
    _registry_call(
        f"champion restored to v{previous}, but cannot record the rollback on v{current}",
        lambda: (
            client.set_model_version_tag(model_name, current, TAG_ROLLED_BACK_AT, _now()),
            client.set_model_version_tag(
                model_name, current, TAG_ROLLBACK_REASON, reason[:TAG_VALUE_MAX_CHARS]
            ),
            client.set_model_version_tag(model_name, current, TAG_PROMOTION_STATUS, "rolled-back"),
            client.set_registered_model_tag(
                model_name,
                "driftgate.last_rollback",
                json.dumps({"at": _now(), "from": current, "to": previous, "reason": reason}),
            ),
        ),
    )
    rolled_back_at = _now()
    set_description_paragraph(
        tracking,
        model_name,
        current,
        DESCRIPTION_ROLLBACK,
        f"demoted {rolled_back_at}, `{CHAMPION_ALIAS}` back to v{previous}: {reason}",
    )
    set_description_paragraph(
        tracking,
        model_name,
        previous,
        DESCRIPTION_PROMOTION,
        f"`{CHAMPION_ALIAS}` again since {rolled_back_at} (rollback from v{current}).",
    )
    return current, previous


def _now() -> str:
    from datetime import UTC, datetime

    return datetime.now(UTC).isoformat(timespec="seconds")


REFERENCE_PROFILE_ARTIFACT = "reference_profile"


def download_reference_profile(
    tracking: TrackingSettings, model_name: str, version: str, destination: Path
) -> Path:
    """Download the version's reference profile folder (for drift checks) into ``destination``."""
    import mlflow

    run_id = _model_version(tracking, model_name, version).run_id
    folder = _registry_call(
        f"cannot download the reference profile of {model_name} v{version}",
        mlflow.artifacts.download_artifacts,
        run_id=run_id,
        artifact_path=REFERENCE_PROFILE_ARTIFACT,
        dst_path=str(destination),
        tracking_uri=tracking.uri,
    )
    return Path(folder)


def log_monitoring_run(
    tracking: TrackingSettings,
    experiment: str,
    run_name: str,
    *,
    params: Mapping[str, Any],
    metrics: Mapping[str, float],
    tags: Mapping[str, str],
    artifacts: Mapping[str, Path],
) -> str:
    """Log one drift-check window as a run of the monitoring experiment; returns its id.

    ``artifacts`` maps an artifact folder to a file or folder to put there.
    """
    import mlflow

    settings = TrackingSettings(
        uri=tracking.uri,
        artifact_location=(
            tracking.artifact_location.rstrip("/") + "-monitoring"
            if tracking.artifact_location
            else None
        ),
        experiment=experiment,
    )

    def log() -> str:
        experiment_id = connect(settings)
        with mlflow.start_run(experiment_id=experiment_id, run_name=run_name) as run:
            clean = {k: _text(v) for k, v in tags.items()}
            mlflow.set_tags({TAG_RUN_KIND: "drift-check", **clean})
            mlflow.log_params({k: _param_value(v) for k, v in params.items()})
            mlflow.log_metrics(_loggable_metrics(metrics))
            for folder, path in artifacts.items():
                if Path(path).is_dir():
                    mlflow.log_artifacts(str(path), artifact_path=folder)
                else:
                    mlflow.log_artifact(str(path), artifact_path=folder)
            return run.info.run_id

    return _registry_call(f"cannot log the drift check {run_name}", log)


def tag_model_version(
    tracking: TrackingSettings, model_name: str, version: str, tags: Mapping[str, str]
) -> None:
    client = _client(tracking)
    for key, value in tags.items():
        _registry_call(
            f"cannot tag {model_name} v{version}",
            client.set_model_version_tag,
            model_name,
            version,
            key,
            _text(value, TAG_VALUE_MAX_CHARS),
        )


# Adoption: a model trained and logged elsewhere, given what a driftgate-trained version
# carries (see jobs/adopt.py). The source run gets the artifacts, the version the tags.
TAG_ADOPTED = "driftgate.adopted"  # "true"
TAG_ADOPTED_AT = "driftgate.adopted.at"  # UTC, ISO 8601
TAG_ADOPTED_FROM = "driftgate.adopted.from"  # the URI given to `driftgate adopt`
TAG_REFERENCE_DIGEST = "driftgate.data.reference_digest"  # content digest of the reference
TAG_REFERENCE_PATH = "driftgate.data.reference_path"  # relative to the project when inside it
DESCRIPTION_ADOPTION = "Adopted"
DATA_CONTRACT_ARTIFACT = "data_contract"


class UnknownModelError(DriftgateError, LookupError):
    """The model, version or run given on the command line is not in the registry (exit 2)."""

    exit_code = EXIT_USAGE

    def __init__(self, message: str) -> None:
        super().__init__(redact_credentials(str(message)))


def is_adopted(version_tags: Mapping[str, str]) -> bool:
    """Whether the version was adopted (trained elsewhere; no driftgate weights)."""
    return version_tags.get(TAG_ADOPTED) == "true"


def _missing(exc: Exception) -> bool:
    return getattr(exc, "error_code", "") in ("RESOURCE_DOES_NOT_EXIST", "INVALID_PARAMETER_VALUE")


def existing_version(tracking: TrackingSettings, model_name: str, version: str) -> str:
    """``version`` of ``model_name`` as registered; UnknownModelError when it is not."""
    from mlflow.exceptions import MlflowException

    try:
        return str(_client(tracking).get_model_version(model_name, version).version)
    except MlflowException as exc:
        if _missing(exc):
            raise UnknownModelError(
                f"models:/{model_name}/{version}: no such registered model version"
            ) from exc
        raise RegistryError(f"cannot read {model_name} v{version}: {exc.message}") from exc


def register_run_model(tracking: TrackingSettings, model_uri: str, model_name: str) -> str:
    """The version of ``model_name`` registered from ``runs:/RUN_ID/PATH``.

    A version already registered from that run's model is reused (adopting the same
    run twice registers it once); otherwise the run's model is registered as a new
    version. UnknownModelError when the run does not exist or logged no model there.
    """
    from mlflow.exceptions import MlflowException

    run_id, _, path = model_uri.removeprefix("runs:/").partition("/")
    client = _client(tracking)
    try:
        run = client.get_run(run_id)
    except MlflowException as exc:
        if _missing(exc):
            raise UnknownModelError(f"{model_uri}: no such run") from exc
        raise RegistryError(f"cannot read run {run_id}: {exc.message}") from exc
    # MLflow 3 keeps a logged model beside the run, not in its artifacts: the model
    # named ``path`` that the run logged last is the one to register (what
    # mlflow.register_model would pick, without its warning and prints on stderr).
    logged = _registry_call(
        f"cannot list the models of run {run_id}",
        client.search_logged_models,
        experiment_ids=[run.info.experiment_id],
        filter_string=f"name = '{path}'",
    )
    steps = {o.model_id: o.step for o in (run.outputs.model_outputs if run.outputs else [])}
    logged = [m for m in logged if m.source_run_id == run_id]
    if not logged:
        raise UnknownModelError(f"{model_uri}: the run logged no model named '{path}'")
    model_id = max(logged, key=lambda m: steps.get(m.model_id, 0)).model_id
    try:
        versions = client.search_model_versions(f"name='{model_name}' and run_id='{run_id}'")
    except MlflowException:  # the model does not exist yet
        versions = []
    # The version's model id is not filled in by every store; its source names it.
    versions = [
        v
        for v in versions
        if getattr(v, "model_id", None) == model_id or v.source == f"models:/{model_id}"
    ]
    if versions:
        return str(min(int(v.version) for v in versions))
    use_store(tracking)  # the version's source, models:/<id>, resolves through it
    try:
        client.create_registered_model(model_name)
    except MlflowException as exc:
        if exc.error_code not in ("RESOURCE_ALREADY_EXISTS", "ALREADY_EXISTS"):
            raise RegistryError(f"cannot create model '{model_name}': {exc.message}") from exc
    created = _registry_call(
        f"cannot register {model_uri} as '{model_name}'",
        client.create_model_version,
        model_name,
        f"models:/{model_id}",
        run_id=run_id,
        model_id=model_id,
    )
    return str(created.version)


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
            _registry_call(
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


def record_adoption(
    tracking: TrackingSettings,
    model_name: str,
    version: str,
    run_id: str,
    *,
    artifacts: Mapping[str, Path],
    metrics: Mapping[str, float],
    run_tags: Mapping[str, str],
    version_tags: Mapping[str, str],
    description: str,
) -> None:
    """Give an adopted version what the gate, the service and the drift check read.

    ``artifacts`` (folder name -> local folder) go to the version's source run, as
    training logs them; then the metrics and ``run_tags`` on that run; then
    ``version_tags``, the description's Adopted paragraph, and last
    ``driftgate.registration=complete``: a failure anywhere above leaves a version the
    gate refuses as a candidate, and adopting it again completes it.
    """
    import time

    from mlflow.entities import Metric

    client = _client(tracking)
    where = f"{model_name} v{version} adoption not completed"
    for folder, path in artifacts.items():
        _registry_call(where, client.log_artifacts, run_id, str(path), folder)
    now = int(time.time() * 1000)
    loggable = _loggable_metrics(metrics)
    if loggable:
        _registry_call(
            where,
            client.log_batch,
            run_id,
            metrics=[Metric(k, float(v), now, 0) for k, v in loggable.items()],
        )
    for key, value in run_tags.items():
        _registry_call(where, client.set_tag, run_id, key, _text(value, TAG_VALUE_MAX_CHARS))
    for key, value in {**version_tags, **{k: f"{v:.6g}" for k, v in metrics.items()}}.items():
        _registry_call(
            where,
            client.set_model_version_tag,
            model_name,
            version,
            key,
            _text(value, TAG_VALUE_MAX_CHARS),
        )
    set_description_paragraph(tracking, model_name, version, DESCRIPTION_ADOPTION, description)
    _registry_call(
        where,
        client.set_model_version_tag,
        model_name,
        version,
        TAG_REGISTRATION,
        REGISTRATION_COMPLETE,
    )
