"""Contract revision with a person in the loop: propose, show, accept.

1. **Propose** (the drift check, :func:`proposal_evidence`): when a ``rejected_share``
   monitor opens or updates a review, the revision its window's traffic asks for
   (:func:`driftgate.data_contracts.revision.propose_revision` on the window's accepted
   and refused records, refused ones with every rule they broke) is added to the
   review's evidence as its diff, one line per changed key.
2. **Show** (``driftgate reviews show ID``, ``driftgate contract revise --from-review
   ID``): the same proposal, built again from the review's latest window against the
   contract in effect now (so a revision accepted meanwhile is not proposed twice).
3. **Accept** (``driftgate contract revise --from-review ID --accept``, and the demo's
   simulated operator, through :func:`accept_revision`): the revised contract is written
   as a new version file beside the current one (``<name>.v<N>.yaml``, never over an
   existing file), the champion model version is tagged with it (``driftgate.contract``),
   and the review is resolved naming the file. Nothing is written without that call.

From then the contract in effect is the new file (``ProjectConfig.contract_in_effect``):
the service rebuilds its validator at its next champion poll and accepts the records it
refused, and the next retrain's data and gate are judged against it. Records refused
before cannot be labelled (``POST /feedback`` joins accepted samples only), so a
retrain learns from the records accepted after the revision.
"""

from __future__ import annotations

import json
import logging
from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import pandas as pd

from driftgate import registry
from driftgate.config import ProjectConfig
from driftgate.config.contract_files import revision_path
from driftgate.core.errors import DriftgateError
from driftgate.data_contracts import Contract
from driftgate.data_contracts.revision import Revision, propose_revision
from driftgate.stores.factories import review_store, sample_store

log = logging.getLogger(__name__)

# The first line of a proposal in a review's evidence; the diff's lines follow it.
PROPOSAL_PREFIX = "contract revision proposed"
# The metric whose breaches carry a proposal.
REFUSED_METRIC = "rejected_share"


class RevisionError(DriftgateError):
    """A revision cannot be proposed or accepted (exit 2): the message says why."""


@dataclass(frozen=True)
class AcceptedRevision:
    revision: Revision
    path: Path
    review_id: str
    champion: str | None  # the model version tagged, None without a champion


def service_note(config: ProjectConfig) -> str:
    """What the running service does with an accepted revision, for the person: it
    follows the contract in effect, unless ``serving.contract`` pins a file."""
    if config.serving.contract:
        return (
            f"the service does NOT apply it: serving.contract pins "
            f"{config.resolve(config.serving.contract)}; point serving.contract at the new "
            "file (or remove it) and restart the service"
        )
    return "the service applies it at its next champion poll"


def window_traffic(
    config: ProjectConfig, contract: Contract, start: object, end: object
) -> tuple[pd.DataFrame, dict[str, int], int]:
    """The contract's columns of every record received in ``[start, end)`` (accepted
    and refused ones together), how many refused records each rule broke, and how many
    were refused."""
    store = sample_store(config)
    try:
        accepted = store.read_window(start, end)
        refused = store.read_rejected(start, end)
    finally:
        store.close()
    refusals: Counter[str] = Counter()
    if len(refused):
        for reasons in refused["reasons"]:
            refusals.update({rule for _, rule in json.loads(reasons or "[]")})
    columns = list(contract.columns)
    parts = [
        frame[[c for c in columns if c in frame.columns]]
        for frame in (accepted, refused)
        if len(frame)
    ]
    received = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()
    return received, dict(refusals), len(refused)


def propose_for_window(config: ProjectConfig, start: object, end: object) -> Revision | None:
    """The revision ``[start, end)``'s traffic asks of the contract in effect (None
    without a contract)."""
    path = config.contract_in_effect()
    if path is None:
        return None
    contract = Contract.load(path)
    received, refusals, refused = window_traffic(config, contract, start, end)
    return propose_revision(contract, received, refusals, refused=refused)


def proposal_evidence(
    config: ProjectConfig, start: object, end: object, review_id: str = "<review id>"
) -> list[str]:
    """Review ``review_id``'s evidence lines for the window's proposal: a head line
    naming the command that accepts it, then the diff (nothing when there is nothing
    to widen)."""
    revision = propose_for_window(config, start, end)
    if revision is None or not revision.changed:
        return []
    head, *diff = revision.diff_lines()
    command = f"driftgate contract revise --from-review {review_id} --accept"
    return [f"{PROPOSAL_PREFIX} ({command}): {head}", *diff]


def propose_for_review(config: ProjectConfig, review_id: str):
    """The review and the revision its latest window's traffic asks for."""
    reviews = review_store(config)
    try:
        review = reviews.get(review_id)
    finally:
        reviews.close()
    start, end = review.last_window
    if start is None or end is None:
        raise RevisionError(f"review {review_id} has no window to propose a revision from")
    revision = propose_for_window(config, start, end)
    if revision is None:
        raise RevisionError("the project has no data.contract to revise")
    return review, revision


def accept_revision(
    config: ProjectConfig,
    review_id: str,
    *,
    by: str,
    reason: str | None = None,
    shown: list[str] | None = None,
) -> AcceptedRevision:
    """Write the revision ``review_id``'s window asks for as the contract's next version,
    tag the champion with it and resolve the review (the module doc).

    ``shown``: the diff lines the person read (the Prefect form): refused when the
    proposal built now differs.

    Raises:
        RevisionError: nothing to widen, the proposal is not the one ``shown``, or that
            version was written meanwhile.
    """
    review, revision = propose_for_review(config, review_id)
    if not revision.changed:
        raise RevisionError(f"review {review_id}: nothing to revise: {revision.diff_lines()[0]}")
    if shown is not None and revision.diff_lines() != shown:
        # The person agreed to ``shown``; the review took a window since (a form can
        # wait for days), so what would be written now is not what they read.
        raise RevisionError(
            f"review {review_id}: the proposal changed since it was shown; nothing written: "
            "show it again"
        )
    current = config.contract_in_effect()
    version = revision.revised.version
    path = revision_path(current, config.contract_revisions_dir, version)
    path.parent.mkdir(parents=True, exist_ok=True)
    when = datetime.now(UTC).isoformat(timespec="seconds")
    header = [
        f"Revision v{version} of {current.name}, accepted by {by} at {when}",
        f"from review {review_id} ({review.monitor}, window {review.last_window[0]}.."
        f"{review.last_window[1]}). What changed:",
        *revision.diff_lines()[1:],
        "Track it with the data: `dvc add` / `git add` this file (docs/data_contracts.md).",
    ]
    text = "".join(f"# {line.strip()}\n" for line in header) + revision.revised.to_yaml()
    try:
        with path.open("x", encoding="utf-8") as handle:  # never over an accepted version
            handle.write(text)
    except FileExistsError:
        raise RevisionError(
            f"{path} exists: version {version} was accepted meanwhile; "
            "show the proposal again against it"
        ) from None
    champion = registry.alias_version(config.tracking, config.model.name, registry.CHAMPION_ALIAS)
    if champion is not None:
        registry.tag_model_version(
            config.tracking,
            config.model.name,
            champion,
            {
                registry.TAG_CONTRACT: f"{revision.revised.name} v{version}",
                registry.TAG_CONTRACT_FILE: str(path),
            },
        )
    pinned = bool(config.serving.contract)
    reviews = review_store(config)
    try:
        why = f" ({reason})" if reason else ""
        line = f"contract revision v{version} accepted by {by}{why}: {path}"
        # A pin is said where the person reads the review, not only in a log.
        reviews.add_evidence(review_id, [f"{line}; {service_note(config)}" if pinned else line])
        if review.status == "open":
            reviews.resolve(review_id, by=by, resolution=f"contract revised to v{version}: {path}")
    finally:
        reviews.close()
    log.info("contract %s v%d accepted by %s: %s", revision.revised.name, version, by, path)
    if pinned:
        log.warning("review %s: %s", review_id, service_note(config))
    return AcceptedRevision(revision, path, review_id, champion)


def record_declined(config: ProjectConfig, review_id: str, *, by: str | None, reason: str) -> None:
    """A proposal a person declined (or nobody answered, ``by`` None), on the review's
    evidence; no contract is written and the review stays as it is (the refused traffic
    goes on, and its next window proposes again)."""
    who = f"declined by {by}" if by else "not answered"
    note_on_review(config, review_id, f"contract revision {who}: {reason}")


def note_on_review(config: ProjectConfig, review_id: str, line: str) -> None:
    """One line of what happened to a proposal, on review ``review_id``'s evidence."""
    reviews = review_store(config)
    try:
        reviews.add_evidence(review_id, [line])
    finally:
        reviews.close()
    log.info("review %s: %s", review_id, line)
