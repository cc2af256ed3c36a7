"""The promotion gate's writes: its results on the candidate, and the champion alias
moved forward (promotion) or back (rollback)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path

from driftgate.config import TrackingSettings
from driftgate.registry.artifacts import log_exports
from driftgate.registry.client import mlflow_client
from driftgate.registry.errors import RegistryError, registry_call
from driftgate.registry.names import (
    CHAMPION_ALIAS,
    DESCRIPTION_GATE,
    DESCRIPTION_PROMOTION,
    DESCRIPTION_ROLLBACK,
    NO_VERSION,
    PREVIOUS_CHAMPION_ALIAS,
    TAG_PROMOTED_AT,
    TAG_PROMOTION_PREVIOUS,
    TAG_PROMOTION_STATUS,
    TAG_ROLLBACK_REASON,
    TAG_ROLLED_BACK_AT,
    TAG_VALUE_MAX_CHARS,
)
from driftgate.registry.values import tag_text
from driftgate.registry.versions import alias_version, set_description_paragraph, tag_model_version


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
    client = mlflow_client(tracking)
    for path in report_files.values():
        registry_call(
            f"cannot upload {path.name} to run {run_id}",
            client.log_artifact,
            run_id,
            str(path),
            artifact_folder,
        )
    log_exports(tracking, run_id, exports)
    tag_model_version(tracking, model_name, version, check_tags)
    for key, value in check_tags.items():
        registry_call(
            f"cannot tag run {run_id}",
            client.set_tag,
            run_id,
            key,
            tag_text(value, TAG_VALUE_MAX_CHARS),
        )
    set_description_paragraph(tracking, model_name, version, DESCRIPTION_GATE, verdict)


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
    client = mlflow_client(tracking)
    try:
        current = alias_version(tracking, model_name, CHAMPION_ALIAS)
    except RegistryError as exc:
        raise RegistryError(f"{exc}; aliases unchanged") from exc
    if current != expected_champion:
        raise RegistryError(
            f"champion of '{model_name}' moved from {expected_champion or 'none'} to "
            f"{current or 'none'} while the gate ran; aliases unchanged, re-run the gate"
        )
    registry_call(
        f"cannot tag {model_name} v{candidate}; aliases unchanged",
        lambda: (
            client.set_model_version_tag(
                model_name, candidate, TAG_PROMOTION_PREVIOUS, current or NO_VERSION
            ),
            client.set_model_version_tag(model_name, candidate, TAG_PROMOTION_STATUS, "pending"),
        ),
    )
    registry_call(
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
    registry_call(
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
    client = mlflow_client(tracking)
    current = alias_version(tracking, model_name, CHAMPION_ALIAS)
    if current is None:
        raise RegistryError(f"model '{model_name}' has no champion to roll back")
    previous_alias = alias_version(tracking, model_name, PREVIOUS_CHAMPION_ALIAS)
    previous = previous_alias
    if previous is None:
        recorded = registry_call(
            f"cannot read {model_name} v{current}", client.get_model_version, model_name, current
        ).tags.get(TAG_PROMOTION_PREVIOUS, NO_VERSION)
        previous = None if recorded == NO_VERSION else recorded
    if previous is None:
        raise RegistryError(f"model '{model_name}' has no previous champion to roll back to")
    before_previous = registry_call(
        f"cannot read {model_name} v{previous}", client.get_model_version, model_name, previous
    ).tags.get(TAG_PROMOTION_PREVIOUS, NO_VERSION)
    registry_call(
        f"cannot move '{CHAMPION_ALIAS}' back to v{previous}; aliases unchanged",
        client.set_registered_model_alias,
        model_name,
        CHAMPION_ALIAS,
        previous,
    )
    if before_previous == NO_VERSION and previous_alias is not None:
        registry_call(
            f"champion restored to v{previous}, but cannot remove '{PREVIOUS_CHAMPION_ALIAS}'",
            client.delete_registered_model_alias,
            model_name,
            PREVIOUS_CHAMPION_ALIAS,
        )
    elif before_previous != NO_VERSION:
        registry_call(
            f"champion restored to v{previous}, but cannot move '{PREVIOUS_CHAMPION_ALIAS}'",
            client.set_registered_model_alias,
            model_name,
            PREVIOUS_CHAMPION_ALIAS,
            before_previous,
        )
    registry_call(
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
