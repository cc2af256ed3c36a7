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
   ``unsampled`` instead, not refused: there is nothing to join its label to.
2. **late**: the sample was served longer than ``serving.label_horizon`` ago.
3. **invalid**: not a label of the task of the version that scored the record
   (:func:`monitors.labels.check_label`).
4. **duplicate** (the same label again: accepted, nothing changes), **conflict** (a
   different label: refused, unless ``serving.label_corrections`` lets it replace the
   stored one, counted as ``corrected``), else **accepted**.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from driftgate.core.errors import DriftgateError
from driftgate.monitors.labels import LabelError, check_label
from driftgate.stores.labels import Key, LabelRow, LabelStore
from driftgate.stores.samples import RequestSampling, to_utc

# Columns of a labels file (`driftgate labels load`).
LABEL_COLUMNS = ("request_id", "record_index", "label")


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
    sampling: RequestSampling | None = None,
    all_or_nothing: bool = True,
    now=None,
) -> FeedbackOutcome:
    """Judge ``items`` and store the labels that pass (see the module doc).

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
    stored = store.labels_of(k for k in keys if k in samples)
    outcome = FeedbackOutcome()
    new: dict[Key, LabelRow] = {}
    replace: dict[Key, LabelRow] = {}
    tasks: dict[tuple[str, str], tuple[str, tuple[str, ...]]] = {}
    horizon_us = None if horizon is None else int(horizon.total_seconds() * 1e6)
    for item, key in zip(items, keys, strict=True):
        sample = samples.get(key)
        if sample is None:
            if sampling is not None and not sampling.keeps(item.request_id):
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
        row = LabelRow(item.request_id, item.record_index, sample, label.text, label.value)
        before = new.get(key) or replace.get(key)
        known = before.label if before is not None else stored.get(key)
        if known is None:
            new[key] = row
        elif known == label.text:
            outcome.duplicates.append(key)
        elif corrections:
            if key in new:  # corrected within this batch: still a new label
                new[key] = row
            else:
                replace[key] = row
        else:
            outcome.conflicts.append(
                _refusal(item, f"label {label.text!r} conflicts with the stored {known!r}")
            )
    if outcome.refused and all_or_nothing:
        return outcome
    if new or replace:
        inserted, raced = store.write(list(new.values()), replace=list(replace.values()),
                                      now_us=now_us)  # fmt: skip
        outcome.accepted.extend(inserted)
        outcome.corrected.extend(replace)
        if raced:  # another writer labelled these first: the same label or a conflict
            now_stored = store.labels_of(raced)
            for key in raced:
                if now_stored.get(key) == new[key].label:
                    outcome.duplicates.append(key)
                else:
                    outcome.conflicts.append(
                        Refusal(-1, key[0], key[1], "labelled differently by another writer")
                    )
        outcome.written = True
    return outcome


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


def load_labels(config, path: str | Path, *, now=None) -> FeedbackOutcome:
    """``driftgate labels load``: store a file's labels, judged as ``POST /feedback``
    judges them, keeping those that pass and counting the others."""
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
    from driftgate.stores.samples import SqlSampleStore

    settings = config.serving
    url = settings.sample_store(config.home_dir)
    # Opening the sample store first creates its tables, so the join has both sides.
    samples = SqlSampleStore(url, sqlite_synchronous=settings.sqlite_synchronous)
    try:
        sampling = samples.sampling(settings.sample_fraction)
    finally:
        samples.close()
    return LabelStore(url, sqlite_synchronous=settings.sqlite_synchronous), sampling
