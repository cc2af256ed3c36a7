"""Adoption: a model trained and logged elsewhere registered, and given what a
driftgate-trained version carries (see jobs/adopt.py). The source run gets the
artifacts, the version the tags."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from driftgate.config import TrackingSettings
from driftgate.registry.client import mlflow_client, use_store
from driftgate.registry.errors import RegistryError, UnknownModelError, is_missing, registry_call
from driftgate.registry.names import (
    DESCRIPTION_ADOPTION,
    TAG_VALUE_MAX_CHARS,
)
from driftgate.registry.values import loggable_metrics, tag_text
from driftgate.registry.versions import mark_complete, set_description_paragraph


def register_run_model(tracking: TrackingSettings, model_uri: str, model_name: str) -> str:
    """The version of ``model_name`` registered from ``runs:/RUN_ID/PATH``.

    A version already registered from that run's model is reused (adopting the same
    run twice registers it once); otherwise the run's model is registered as a new
    version. UnknownModelError when the run does not exist or logged no model there.
    """
    from mlflow.exceptions import MlflowException

    run_id, _, path = model_uri.removeprefix("runs:/").partition("/")
    client = mlflow_client(tracking)
    try:
        run = client.get_run(run_id)
    except MlflowException as exc:
        if is_missing(exc):
            raise UnknownModelError(f"{model_uri}: no such run") from exc
        raise RegistryError(f"cannot read run {run_id}: {exc.message}") from exc
    # MLflow 3 keeps a logged model beside the run, not in its artifacts: the model
    # named ``path`` that the run logged last is the one to register (what
    # mlflow.register_model would pick, without its warning and prints on stderr).
    logged = registry_call(
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
    created = registry_call(
        f"cannot register {model_uri} as '{model_name}'",
        client.create_model_version,
        model_name,
        f"models:/{model_id}",
        run_id=run_id,
        model_id=model_id,
    )
    return str(created.version)


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

    client = mlflow_client(tracking)
    where = f"{model_name} v{version} adoption not completed"
    for folder, path in artifacts.items():
        registry_call(where, client.log_artifacts, run_id, str(path), folder)
    now = int(time.time() * 1000)
    loggable = loggable_metrics(metrics)
    if loggable:
        registry_call(
            where,
            client.log_batch,
            run_id,
            metrics=[Metric(k, float(v), now, 0) for k, v in loggable.items()],
        )
    for key, value in run_tags.items():
        registry_call(where, client.set_tag, run_id, key, tag_text(value, TAG_VALUE_MAX_CHARS))
    for key, value in {**version_tags, **{k: f"{v:.6g}" for k, v in metrics.items()}}.items():
        registry_call(
            where,
            client.set_model_version_tag,
            model_name,
            version,
            key,
            tag_text(value, TAG_VALUE_MAX_CHARS),
        )
    set_description_paragraph(tracking, model_name, version, DESCRIPTION_ADOPTION, description)
    mark_complete(tracking, model_name, version, where)
