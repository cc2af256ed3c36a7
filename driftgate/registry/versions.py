"""Model versions and aliases: reading a version, its tags and description, and which
version an alias or "the latest" names.

The aliases themselves move only in :mod:`driftgate.registry.promotion`.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass

from driftgate.config import TrackingSettings
from driftgate.core.redaction import redact_credentials
from driftgate.registry.client import mlflow_client, use_store
from driftgate.registry.errors import RegistryError, UnknownModelError, is_missing, registry_call
from driftgate.registry.names import (
    DESCRIPTION_MAX_CHARS,
    REGISTRATION_COMPLETE,
    TAG_ADOPTED,
    TAG_FEATURES,
    TAG_REGISTRATION,
    TAG_TASK,
    TAG_VALUE_MAX_CHARS,
)
from driftgate.registry.values import tag_text

log = logging.getLogger(__name__)


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


def version_task(version_tags: Mapping[str, str]) -> str:
    """A version's task (tag ``driftgate.task``); versions logged before tasks are binary."""
    return version_tags.get(TAG_TASK, "binary")


def is_adopted(version_tags: Mapping[str, str]) -> bool:
    """Whether the version was adopted (trained elsewhere; no driftgate weights)."""
    return version_tags.get(TAG_ADOPTED) == "true"


def latest_version(tracking: TrackingSettings, model_name: str) -> str:
    """The newest completely registered version (see TAG_REGISTRATION); versions cut
    off mid-registration are skipped, with a warning naming them."""
    versions = registry_call(
        f"cannot list versions of '{model_name}'",
        mlflow_client(tracking).search_model_versions,
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


def mark_complete(tracking: TrackingSettings, model_name: str, version: str, where: str) -> None:
    """Write the tag that says a version's registration ran to its end: last, so that a
    failure before it leaves a version :func:`latest_version` never picks. ``where``
    names what is left incomplete when this fails."""
    registry_call(
        where,
        mlflow_client(tracking).set_model_version_tag,
        model_name,
        version,
        TAG_REGISTRATION,
        REGISTRATION_COMPLETE,
    )


def model_version(tracking: TrackingSettings, model_name: str, version: str):
    """The registry's record of ``version`` (tags, run id, description)."""
    return registry_call(
        f"cannot read {model_name} v{version}",
        mlflow_client(tracking).get_model_version,
        model_name,
        version,
    )


def version_info(tracking: TrackingSettings, model_name: str, version: str) -> VersionInfo:
    import mlflow

    found = model_version(tracking, model_name, version)
    run = registry_call(
        f"cannot read run {found.run_id}", mlflow_client(tracking).get_run, found.run_id
    )
    use_store(tracking)
    info = registry_call(
        f"cannot read the model of {model_name} v{version}",
        mlflow.models.get_model_info,
        f"models:/{model_name}/{version}",
    )
    signature = info.signature.inputs.to_dict() if info.signature is not None else None
    return VersionInfo(
        model_name=model_name,
        version=str(version),
        run_id=found.run_id,
        experiment_id=run.info.experiment_id,
        version_tags=dict(found.tags),
        run_metrics=dict(run.data.metrics),
        run_tags=dict(run.data.tags),
        signature_inputs=signature,
    )


def existing_version(tracking: TrackingSettings, model_name: str, version: str) -> str:
    """``version`` of ``model_name`` as registered; UnknownModelError when it is not."""
    from mlflow.exceptions import MlflowException

    try:
        return str(mlflow_client(tracking).get_model_version(model_name, version).version)
    except MlflowException as exc:
        if is_missing(exc):
            raise UnknownModelError(
                f"models:/{model_name}/{version}: no such registered model version"
            ) from exc
        raise RegistryError(f"cannot read {model_name} v{version}: {exc.message}") from exc


def version_test_metric(
    tracking: TrackingSettings, model_name: str, version: str, metric: str
) -> float | None:
    """The version's gate-time test metric ``test_<metric>``: its version tag if it has
    one, else its run's metric (logged by training and adoption); None when neither."""
    key = f"test_{metric}"
    found = model_version(tracking, model_name, version)
    tagged = found.tags.get(key)
    if tagged is not None:
        try:
            return float(tagged)
        except ValueError:
            pass  # a tag that is not a number: fall back to the run's metric
    run = registry_call(
        f"cannot read run {found.run_id}", mlflow_client(tracking).get_run, found.run_id
    )
    value = run.data.metrics.get(key)
    return None if value is None else float(value)


def alias_version(tracking: TrackingSettings, model_name: str, alias: str) -> str | None:
    """The version an alias points at, or None when the alias (or model) does not exist."""
    from mlflow.exceptions import MlflowException

    client = mlflow_client(tracking)
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
    tags = registry_call(
        f"cannot read {model_name} v{version}",
        mlflow_client(tracking).get_model_version,
        model_name,
        version,
    ).tags
    if TAG_FEATURES not in tags:
        raise RegistryError(f"{model_name} v{version} has no {TAG_FEATURES} tag")
    return json.loads(tags[TAG_FEATURES])


def run_metrics(tracking: TrackingSettings, run_id: str) -> dict[str, float]:
    run = registry_call(f"cannot read run {run_id}", mlflow_client(tracking).get_run, run_id)
    return dict(run.data.metrics)


def tag_model_version(
    tracking: TrackingSettings, model_name: str, version: str, tags: Mapping[str, str]
) -> None:
    client = mlflow_client(tracking)
    for key, value in tags.items():
        registry_call(
            f"cannot tag {model_name} v{version}",
            client.set_model_version_tag,
            model_name,
            version,
            key,
            tag_text(value, TAG_VALUE_MAX_CHARS),
        )


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
    current = model_version(tracking, model_name, version).description
    registry_call(
        f"cannot update the description of {model_name} v{version}",
        mlflow_client(tracking).update_model_version,
        model_name,
        version,
        description=with_paragraph(current, label, redact_credentials(text)),
    )
