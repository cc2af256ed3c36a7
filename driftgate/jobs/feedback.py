"""Delayed labels: judge and store labels of served records, from any source.

:func:`submit_labels` is the one path: ``POST /feedback`` (:mod:`serving.routers.feedback`)
sends a request's labels all or nothing, ``driftgate labels load FILE``
(:func:`load_labels`) sends a file's rows and keeps those that pass. Each label is
joined to its sample by ``(request_id, record_index)`` and judged in this order:

1. **unknown**: no sample with that key. The service acknowledges a prediction only
   once its samples are committed, so the id of every answer a client has received is
   known; a label that arrives before its request was durably written (the request is
   still in flight) is unknown *now* and succeeds when sent again (the 404 says so).
   A request the service chose not to log (``serving.sample_fraction``) is counted as
   ``unsampled`` instead, not refused: there is nothing to join its label to. Under
   sampling, an unverified sender gets ``unsampled`` for every unknown key, so that its
   answers never tell which ids the keyed hash logs.
2. **late**: the sample was served longer than ``serving.label_horizon`` ago.
3. **invalid**: not a label of the task of the version that scored the record
   (:func:`monitors.labels.check_label`).
4. against a stored label, by who sends and who sent (``source``: an authenticated
   sender's name, or ``unverified``; :mod:`driftgate.stores.labels`):

   - a verified sender: the same label is a **duplicate** (accepted, nothing changes);
     a different one is a **conflict** (refused), unless ``serving.label_corrections``
     lets it replace the stored one (``corrected``). A verified label replaces an
     unverified one either way (``corrected``): evidence someone vouches for outranks
     evidence nobody does, and an open client cannot block it by labelling first;
   - an unverified sender: any stored label is a **conflict** ("already labelled"),
     the same answer whether its label matches or not, so that no client learns a
     stored label by probing (a duplicate answer for 0 and a 409 for 1 would tell it);
     with ``label_corrections`` it replaces an unverified label (``corrected``), never
     a verified one.

   No refusal names the stored label: the sender learns that the record is labelled,
   never what it holds. Two labels for one record in one request are judged against
   each other as a duplicate or conflict (both are the sender's own); else **accepted**.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from driftgate.core.errors import DriftgateError
from driftgate.monitors.labels import LabelError, check_label
from driftgate.stores.labels import (
    Key,
    LabelRow,
    LabelStore,
    StoredLabel,
    is_verified,
)
from driftgate.stores.samples import RequestSampling, to_utc

# Columns of a labels file (`driftgate labels load`).
LABEL_COLUMNS = ("request_id", "record_index", "label")
# The source `driftgate labels load` records unless told another: whoever runs it can
# read the project's configuration and stores, so it is an authenticated sender.
LOAD_SOURCE = "labels-load"
# What an unverified sender is told of a labelled record, whatever its label: nothing more.
ALREADY_LABELLED = "already labelled; nothing stored"


class LabelFileError(DriftgateError, ValueError):
    """A labels file cannot be used; the message names the file and the column."""

    exit_code = 2


@dataclass(frozen=True)
class LabelInput:
    """One label as sent: ``position`` is its place in the request or file (for errors)."""

    position: int
    request_id: str
    record_index: int
    label: object


@dataclass
class Refusal:
    position: int
    request_id: str
    record_index: int
    reason: str

    def to_dict(self) -> dict:
        return {
            "record": self.position,
            "request_id": self.request_id,
            "record_index": self.record_index,
            "reason": self.reason,
        }


@dataclass
class FeedbackOutcome:
    """What became of each label (see the module doc for the categories)."""

    accepted: list[Key] = field(default_factory=list)
    duplicates: list[Key] = field(default_factory=list)
    corrected: list[Key] = field(default_factory=list)
    unsampled: list[Key] = field(default_factory=list)
    unknown: list[Refusal] = field(default_factory=list)
    late: list[Refusal] = field(default_factory=list)
    invalid: list[Refusal] = field(default_factory=list)
    conflicts: list[Refusal] = field(default_factory=list)
    written: bool = False

    @property
    def refused(self) -> bool:
        return bool(self.unknown or self.late or self.invalid or self.conflicts)

    def counts(self) -> dict[str, int]:
        return {
            name: len(getattr(self, name))
            for name in (
                "accepted", "duplicates", "corrected", "unsampled", "unknown", "late",
                "invalid", "conflicts",
            )
        }  # fmt: skip


OutputsOf = Callable[[str, str], tuple[str, tuple[str, ...]]]


def submit_labels(
    store: LabelStore,
    items: Iterable[LabelInput],
    *,
    outputs_of: OutputsOf,
    horizon: pd.Timedelta | None,
    corrections: bool = False,
    source: str,
    sampling: RequestSampling | None = None,
    all_or_nothing: bool = True,
    now=None,
) -> FeedbackOutcome:
    """Judge ``items`` and store the labels that pass (see the module doc).

    ``source``: who sends them (stored with each label): an authenticated sender's
    name, or :data:`~driftgate.stores.labels.UNVERIFIED`.

    ``outputs_of(model_name, version)`` gives a version's task and classes.
    ``sampling``: which requests the service logged (the sample store's, at
    ``serving.sample_fraction``; None: every one), so an unknown id that was not logged
    is told from one that was never served exactly as the service decided.
    ``all_or_nothing``: any refused label stores none (the HTTP contract: the client
    fixes the request and sends it again, which is safe because labels are idempotent);
    otherwise the labels that pass are stored and the others counted.
    """
    items = list(items)
    now_us = to_utc(now or pd.Timestamp.now(tz="UTC")).value // 1000
    keys = [(i.request_id, i.record_index) for i in items]
    samples = store.samples_of(keys)
    stored = store.stored_of(k for k in keys if k in samples)
    verified = is_verified(source)
    outcome = FeedbackOutcome()
    new: dict[Key, LabelRow] = {}
    replace: dict[Key, LabelRow] = {}
    tasks: dict[tuple[str, str], tuple[str, tuple[str, ...]]] = {}
    horizon_us = None if horizon is None else int(horizon.total_seconds() * 1e6)
    for item, key in zip(items, keys, strict=True):
        sample = samples.get(key)
        if sample is None:
            # An unverified sender (feedback_auth: none) is told nothing the sampling
            # decided: "unsampled" for an id the keyed hash skips and a 404 for one it
            # keeps would let any client collect ids that are never logged, then use
            # each once (found in review of issue 28, 3). It gets "unsampled" for every
            # unknown id; a verified sender's in-flight labels still get the 404 retry.
            if sampling is not None and (not verified or not sampling.keeps(item.request_id)):
                outcome.unsampled.append(key)
            else:
                outcome.unknown.append(_refusal(item, "no such request id and record index"))
            continue
        if horizon_us is not None and now_us - sample.received_us > horizon_us:
            served = pd.Timestamp(sample.received_us, unit="us", tz="UTC")
            outcome.late.append(
                _refusal(item, f"served {served.isoformat()}, beyond serving.label_horizon")
            )
            continue
        version = (sample.model_name, sample.model_version)
        if version not in tasks:
            tasks[version] = outputs_of(*version)
        task, classes = tasks[version]
        try:
            label = check_label(task, classes, item.label)
        except LabelError as exc:
            outcome.invalid.append(_refusal(item, f"label: {exc}"))
            continue
        row = LabelRow(item.request_id, item.record_index, sample, label.text, label.value,
                       source)  # fmt: skip
        before = new.get(key) or replace.get(key)
        if before is not None:  # the same record twice in this batch: the sender's own
            if before.label == label.text:
                outcome.duplicates.append(key)
            elif corrections:
                (new if key in new else replace)[key] = row
            else:
                outcome.conflicts.append(
                    _refusal(item, "another label for this record in this request")
                )
            continue
        known = stored.get(key)
        verdict = _against_stored(known, label.text, verified, corrections)
        if verdict == "new":
            new[key] = row
        elif verdict == "duplicate":
            outcome.duplicates.append(key)
        elif verdict == "replace":
            replace[key] = row
        else:
            outcome.conflicts.append(_refusal(item, verdict))
    if outcome.refused and all_or_nothing:
        return outcome
    if new or replace:
        inserted, raced = store.write(list(new.values()), replace=list(replace.values()),
                                      now_us=now_us)  # fmt: skip
        outcome.accepted.extend(inserted)
        outcome.corrected.extend(replace)
        if raced:  # another writer labelled these first: the same label or a conflict
            now_stored = store.stored_of(raced)
            for key in raced:
                known = now_stored.get(key)
                if verified and known is not None and known.label == new[key].label:
                    outcome.duplicates.append(key)
                else:  # the stored label is not named, as for any conflict
                    reason = "labelled by another writer meanwhile; nothing stored"
                    outcome.conflicts.append(Refusal(-1, key[0], key[1], reason))
        outcome.written = True
    return outcome


def _against_stored(
    known: StoredLabel | None, label: str, verified: bool, corrections: bool
) -> str:
    """``new``, ``duplicate``, ``replace``, or the reason of a conflict (module doc, 4).

    A reason never holds the stored label: a 409 that echoed it let any client read
    every record's label (issue 28)."""
    if known is None:
        return "new"
    if not verified:
        if corrections and not is_verified(known.source):
            return "replace"
        return ALREADY_LABELLED
    if known.label == label:
        # The same label: a verified sender's word replaces an unverified one's.
        return "duplicate" if is_verified(known.source) else "replace"
    if corrections or not is_verified(known.source):
        return "replace"
    return (
        "a different label is stored for this record; nothing stored "
        "(serving.label_corrections: true lets a new one replace it)"
    )


def _refusal(item: LabelInput, reason: str) -> Refusal:
    return Refusal(item.position, item.request_id, item.record_index, reason)


def read_label_file(path: str | Path) -> list[LabelInput]:
    """The rows of a CSV/Parquet labels file (:func:`training.data.read_table`) with the
    columns ``request_id``, ``record_index`` and ``label``."""
    from driftgate.training.data import DataError, read_table

    try:
        frame = read_table(path)
    except DataError as exc:
        raise LabelFileError(str(exc)) from exc
    missing = [c for c in LABEL_COLUMNS if c not in frame.columns]
    if missing:
        raise LabelFileError(
            f"{path}: missing column(s) {', '.join(missing)} (a labels file has "
            f"{', '.join(LABEL_COLUMNS)}; found: {', '.join(map(str, frame.columns))})"
        )
    for column in ("request_id", "label"):
        _refuse_non_scalars(frame, column, path)
    indexes = pd.to_numeric(frame["record_index"], errors="coerce")
    bad = indexes.isna() | (indexes % 1 != 0) | (indexes < 0)
    if bad.any():
        row = int(bad.to_numpy().nonzero()[0][0])
        raise LabelFileError(
            f"{path}: column record_index: row {row} is "
            f"{frame['record_index'].iloc[row]!r}, not a record index (an integer >= 0)"
        )
    items = []
    for position, (request_id, index, label) in enumerate(
        zip(frame["request_id"].astype(str), indexes.astype("int64"), frame["label"], strict=True)
    ):
        items.append(LabelInput(position, request_id, int(index), _plain(label)))
    return items


def _refuse_non_scalars(frame: pd.DataFrame, column: str, path: str | Path) -> None:
    """A Parquet list, map or struct column holds arrays and dicts: a label [0, 1]
    ended in a traceback (numpy's ``item()``), [1] was silently read as 1, and a list
    request id was read as the text "['a']". A file whose cells are not single values
    is not a labels file: refused whole, naming the column and the first such row."""
    if not pd.api.types.is_object_dtype(frame[column]):
        return  # typed columns (numbers, strings) hold single values by construction
    scalar = frame[column].map(pd.api.types.is_scalar).to_numpy(dtype=bool)
    if not scalar.all():
        row = int((~scalar).nonzero()[0][0])
        shown = repr(frame[column].iloc[row])
        shown = shown if len(shown) <= 60 else shown[:57] + "..."
        raise LabelFileError(
            f"{path}: column {column}: row {row} is {shown}, not a single value "
            "(a list, array or mapping; one label per request id and record index)"
        )


def _plain(value: object) -> object:
    """A file cell as the JSON value a client would send (numpy scalars to Python; a
    whole float such as 1.0, how CSV readers give an integer column with gaps, to int)."""
    if hasattr(value, "item"):
        value = value.item()
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def load_labels(
    config, path: str | Path, *, source: str = LOAD_SOURCE, now=None
) -> FeedbackOutcome:
    """``driftgate labels load``: store a file's labels, judged as ``POST /feedback``
    judges them, keeping those that pass and counting the others, under ``source``."""
    from functools import cache

    from driftgate import registry

    items = read_label_file(path)
    settings = config.serving

    @cache
    def outputs_of(model_name: str, version: str):
        return registry.version_outputs(config.tracking, model_name, version)

    store, sampling = _open_stores(config)
    try:
        return submit_labels(
            store,
            items,
            outputs_of=outputs_of,
            horizon=settings.horizon,
            corrections=settings.label_corrections,
            source=source,
            sampling=sampling,
            all_or_nothing=False,
            now=now,
        )
    finally:
        store.close()


def open_label_store(config) -> LabelStore:
    """The label store of the project: in the service's sample store database."""
    return _open_stores(config)[0]


def _open_stores(config) -> tuple[LabelStore, RequestSampling]:
    """The label store, and which requests the service logs (the sample store's key)."""
    from driftgate.stores.factories import label_store, sample_store

    # Opening the sample store first creates its tables, so the join has both sides.
    samples = sample_store(config)
    try:
        sampling = samples.sampling(config.serving.sample_fraction)
    finally:
        samples.close()
    return label_store(config), sampling
