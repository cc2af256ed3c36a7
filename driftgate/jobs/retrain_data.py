"""The data a retrain trains and is gated on: the configured data plus the window.

A ``retrain`` action answers a breach in one window of production. What the model has
not seen is that window, so the retrain's data version is the configured data (exactly
what ``driftgate train`` reads) with the window's **labelled** accepted records added:
their stored features joined to the labels that arrived for them (``POST /feedback``,
``driftgate labels load``). Records without a label cannot be trained on, and rejected
records were never scored, so neither is added.

How the window is added: it is split by the configured method and shares
(:func:`training.data.split_reference`; chronological by default, so the window's
latest rows are its test part) and each part is appended to the same split of the
configured data. The configured test rows stay in the test split, so the gate still
scores candidate and champion on every row it scored before, plus the window's newest.

**Who vouched for a label decides where its record may go** (issue 28: labels posted by
any client, flipped on one region, reached both the candidate's training rows and the
gate's test rows, so the gate scored the backdoored candidate 0.16 AUC above the
champion and promoted it). Every label carries its source (:mod:`stores.labels`):

- the split above is made of the window's **verified** labels only (an authenticated
  sender's), so the validation and test rows the gate scores on are verified;
- **unverified** labels (``serving.feedback_auth: none`` without a token) join the
  training split only, and only those older than every verified row of the held-out
  (validation and test) part: the gate's rows are held out from them by source and by
  time, and a candidate is never scored on labels from the source that trained it.
  The newer ones are left out, and counted;
- a window without enough verified labels to split adds nothing, however many
  unverified ones it has: with no verified rows to score it on, a candidate trained on
  unverified labels could be judged only on its own data.

The result is written once per retrain, as the folder ``driftgate prepare`` writes
(``<home>/retrains/<retrain id>/data``), and the retrain's config points ``data.prepared``
at it. Training and the gate both read that folder, so the gate's ``data_version`` check
holds (the candidate was trained on the data version it is scored on) whether both run
in this process or in a Prefect worker that builds the same folder from the same
stores. A window with too few labelled records to give each split one adds nothing:
the retrain then trains on the configured data and says so.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from driftgate.config import ProjectConfig
from driftgate.jobs.data import prepare_data
from driftgate.monitors.rules import RetrainDataSettings
from driftgate.stores.labels import is_verified
from driftgate.training.data import RECENT_SPLIT, DataError, Splits, split_reference
from driftgate.training.prepared import (
    SPLIT_FILES,
    WINDOW_ROWS_FILE,
    read_window_rows,
    save_prepared,
)

log = logging.getLogger(__name__)

SPLIT_NAMES = ("train", "validation", "test")
# In the data folder: rows the window added to each split.
ADDED_FILE = WINDOW_ROWS_FILE
# Beside the data folder: this retrain found too few labelled records and trains on the
# configured data.
CONFIGURED_ONLY_FILE = "configured-data-only"
# Beside the data folder: the monitor's ``retrain.data`` settings, written when the
# retrain is claimed, so whichever process builds the data (here, a worker sharing the
# home folder) builds it from the same settings.
DATA_SETTINGS_FILE = "data-settings.json"
NO_LABELS = "no labelled records in the window"
TOO_FEW_VERIFIED = (
    "too few verified labels in the window to hold out the gate's rows; its {unverified} "
    "unverified label(s) are not trained on"
)
# Lines of ADDED_FILE besides the splits: unverified labels trained on, and left out.
UNVERIFIED_TRAIN, UNVERIFIED_LEFT_OUT = "unverified_train", "unverified_left_out"
# 1: the region guard flagged the unverified labels, and none were trained on; what it
# found is in FLAGGED_FILE of the data folder.
UNVERIFIED_FLAGGED = "unverified_flagged"
FLAGGED_FILE = "unverified_flagged.txt"
# Columns window_training_rows adds beside the training data's: who sent each label and
# its record's event time (dropped before anything is written).
SOURCE_COLUMN, EVENT_COLUMN = "__label_source__", "__event_us__"
_TARGET_VALUE = "__label_value__"  # the label as a number (binary 0/1, a class index)
# ... and the class the champion answered for the record (-1 when it gave none).
ANSWERED_COLUMN = "__answered_class__"
# The region guard (select_window_rows): a feature's range is cut into this many
# quantile bins of the unverified labels; a bin is flagged when its labels disagree
# with what the champion answered this much more often than the others' do, and a
# one-sided two-proportion test says so at this level, shared by every feature and bin.
GUARD_BINS, GUARD_MIN_ROWS, GUARD_EFFECT, GUARD_ALPHA = 5, 20, 0.3, 0.001


@dataclass(frozen=True)
class RetrainData:
    """The config a retrain runs with and what the window added to each split."""

    config: ProjectConfig
    folder: Path | None  # None: the configured data, unchanged
    added: dict[str, int]  # split -> window rows added (train: unverified ones included)
    unverified: dict[str, int] = field(default_factory=dict)  # trained on / left out
    reason: str = NO_LABELS  # why the configured data alone (folder None)
    flagged: str | None = None  # what the region guard found in the unverified labels
    settings: RetrainDataSettings = field(default_factory=RetrainDataSettings)

    @property
    def summary(self) -> str:
        if self.folder is None:
            return f"trained on the configured data ({self.reason})"
        parts = ", ".join(f"{rows} to {split}" for split, rows in self.added.items())
        records = "the window's labelled records"
        if self.settings.recent is not None:
            records = f"the labelled records of the last {self.settings.recent}"
        if self.settings.rows is not None:
            records += f" (newest {self.settings.rows} at most)"
        if self.settings.reference == "exclude":
            text = f"trained on {records} alone, the newest tested ({parts})"
        else:
            text = f"trained on the configured data + {records} ({parts})"
        trained, left = (self.unverified.get(k, 0) for k in (UNVERIFIED_TRAIN, UNVERIFIED_LEFT_OUT))
        if self.flagged is not None:
            text += f"; {left} unverified label(s) left out, flagged for review: {self.flagged}"
        elif trained or left:
            text += (
                f"; {trained} unverified label(s) in train only, older than every scored "
                f"row; {left} newer unverified label(s) left out"
            )
        return text


def save_data_settings(
    config: ProjectConfig, retrain_id: str, settings: RetrainDataSettings
) -> None:
    """Record the monitor's ``retrain.data`` for the retrain (read by :func:`retrain_data`)."""
    path = config.home_dir / "retrains" / retrain_id / DATA_SETTINGS_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(settings.model_dump_json())


def load_data_settings(config: ProjectConfig, retrain_id: str) -> RetrainDataSettings:
    """The retrain's recorded ``retrain.data``; the defaults when none was recorded."""
    path = config.home_dir / "retrains" / retrain_id / DATA_SETTINGS_FILE
    if not path.is_file():
        return RetrainDataSettings()
    return RetrainDataSettings.model_validate_json(path.read_text())


def retrain_data(config: ProjectConfig, retrain_id: str, window: tuple[str, str]) -> RetrainData:
    """The retrain's data version, built on first use and reused after (a worker and
    the gate that follows it read the same folder)."""
    folder = config.home_dir / "retrains" / retrain_id / "data"
    settings = load_data_settings(config, retrain_id)
    # Decided once: labels that arrive while the candidate trains must not change the
    # data the gate scores it on (its data_version check would fail).
    configured_only = folder.with_name(CONFIGURED_ONLY_FILE)
    if configured_only.is_file():
        return RetrainData(
            config, None, {}, reason=configured_only.read_text().strip(), settings=settings
        )
    if not (folder / SPLIT_FILES["train"]).is_file():
        added = build(config, window, folder, settings)
        if isinstance(added, str):
            log.info("retrain %s: %s (%s..%s)", retrain_id, added, *window)
            configured_only.parent.mkdir(parents=True, exist_ok=True)
            configured_only.write_text(added + "\n")
            return RetrainData(config, None, {}, reason=added, settings=settings)
    else:
        added = read_window_rows(folder)
    splits = {name: added[name] for name in SPLIT_NAMES if name in added}
    unverified = {
        k: added[k]
        for k in (UNVERIFIED_TRAIN, UNVERIFIED_LEFT_OUT, UNVERIFIED_FLAGGED)
        if k in added
    }
    prepared = config.data.model_copy(update={"prepared": str(folder)})
    flagged = folder / FLAGGED_FILE
    return RetrainData(
        config.model_copy(update={"data": prepared}),
        folder,
        splits,
        unverified=unverified,
        flagged=flagged.read_text().strip() if flagged.is_file() else None,
        settings=settings,
    )


def data_window(window: tuple[str, str], settings: RetrainDataSettings) -> tuple[str, str]:
    """The span of labelled records the retrain reads: the breaching window, or with
    ``retrain.data.recent`` that long before the window's end."""
    if settings.recent_length is None:
        return window
    end = pd.Timestamp(window[1])
    end = end.tz_localize("UTC") if end.tzinfo is None else end
    return ((end - settings.recent_length).isoformat(), window[1])


def build(
    config: ProjectConfig,
    window: tuple[str, str],
    folder: Path,
    settings: RetrainDataSettings | None = None,
) -> dict[str, int] | str:
    """Write the configured splits with the window's labelled records added (or, with
    ``retrain.data.reference: exclude``, those records alone) into ``folder``
    (atomically: a crash leaves no half-written version) and return the rows added;
    when the window gives too few verified labels to split, write nothing and return
    why."""
    settings = settings or RetrainDataSettings()
    data = prepare_data(config, validate_contract=False)
    labelled = window_training_rows(
        config, data_window(window, settings), data.features, data.target, data.splits.train
    )
    if settings.rows is not None:  # in time order: the newest are last
        labelled = labelled.iloc[max(0, len(labelled) - settings.rows) :]
    # A recent window is split so that the candidate is scored on the newest records,
    # the present it is meant for, whatever data.split says, and learns from every
    # older one: its validation rows are drawn from the rows before the test
    # (RECENT_SPLIT), not the newest ones before it, which after a change were the only
    # changed rows it could have learnt from.
    selected = select_window_rows(
        labelled, config, method=None if settings.is_default else RECENT_SPLIT
    )
    if isinstance(selected, str):
        return selected
    parts, unverified, flagged = selected
    if settings.reference == "exclude":
        base = {name: getattr(data.splits, name).iloc[:0] for name in SPLIT_NAMES}
    else:
        base = {name: getattr(data.splits, name) for name in SPLIT_NAMES}
    joined = Splits(
        **{name: _append(base[name], getattr(parts, name)) for name in SPLIT_NAMES},
        production=data.splits.production,
    )
    raw = pd.concat([joined.reference, joined.production], ignore_index=True)
    staging = folder.with_name(f".{folder.name}-{uuid.uuid4().hex[:8]}")
    save_prepared(raw, joined, staging)
    added = {name: len(getattr(parts, name)) for name in SPLIT_NAMES} | unverified
    (staging / ADDED_FILE).write_text("".join(f"{k} {v}\n" for k, v in added.items()))
    if flagged is not None:
        (staging / FLAGGED_FILE).write_text(flagged + "\n")
    try:
        os.replace(staging, folder)  # another builder may have won: same data, keep theirs
    except OSError:
        shutil.rmtree(staging, ignore_errors=True)
        if not (folder / SPLIT_FILES["train"]).is_file():
            raise
    return added


def select_window_rows(
    labelled: pd.DataFrame, config: ProjectConfig, method: str | None = None
) -> tuple[Splits, dict[str, int], str | None] | str:
    """Where the window's labelled records go (the module doc): the verified ones split
    by the configured method and shares, the unverified ones older than every held-out
    verified row added to train. ``labelled`` is :func:`window_training_rows`' frame;
    the result's splits no longer hold its source and event-time columns. Returns
    (splits, unverified counts, what the region guard flagged or None), or why nothing
    is added."""
    if labelled.empty:
        return NO_LABELS
    verified = labelled[SOURCE_COLUMN].map(is_verified).to_numpy(dtype=bool)
    settings = config.data
    try:
        parts = split_reference(
            labelled[verified],
            labelled.iloc[:0],
            settings.validation_share,
            settings.test_share,
            method=method or settings.split,
            seed=settings.split_seed,
            time_column=settings.time,
            target=settings.target,
        )
    except DataError:  # too few verified labels to give every split one
        return TOO_FEW_VERIFIED.format(unverified=int((~verified).sum()))
    held_out = pd.concat([parts.validation, parts.test])
    # Strictly older than the oldest scored row: a record of the same instant (one
    # request's records share its time) is not "before" it.
    unverified = labelled[~verified]
    older = unverified[unverified[EVENT_COLUMN] < held_out[EVENT_COLUMN].min()]
    flagged = concentrated_disagreement(older, settings.target)
    if flagged is not None:  # for a person to review, not to train on
        log.warning("unverified labels left out of the retrain, for review: %s", flagged)
        older = older.iloc[:0]
    train = pd.concat([parts.train, older]).sort_values(EVENT_COLUMN, kind="stable")
    internal = [SOURCE_COLUMN, EVENT_COLUMN, ANSWERED_COLUMN, _TARGET_VALUE]
    splits = Splits(
        train=train.drop(columns=internal).reset_index(drop=True),
        validation=parts.validation.drop(columns=internal),
        test=parts.test.drop(columns=internal),
        production=parts.production.drop(columns=internal),
    )
    counts = {UNVERIFIED_TRAIN: len(older), UNVERIFIED_LEFT_OUT: len(unverified) - len(older)}
    if flagged is not None:
        counts[UNVERIFIED_FLAGGED] = 1
    return splits, counts, flagged


def concentrated_disagreement(rows: pd.DataFrame, target: str) -> str | None:
    """Where unverified labels contradict the champion in one region of the inputs.

    A backdoor by labels is a shift concentrated in one range of one feature: there the
    labels say the opposite of what the champion answered, elsewhere they agree about as
    often as labels do. Each numeric feature's range over ``rows`` is cut into
    ``GUARD_BINS`` quantile bins; a bin of at least ``GUARD_MIN_ROWS`` labels is
    flagged when its share of labels unlike the champion's answer exceeds the other
    bins' by ``GUARD_EFFECT`` and a one-sided two-proportion z-test rejects equal shares
    at ``GUARD_ALPHA`` divided among every feature and bin tested. Returns what was
    found (feature, range, both shares), or None. Rows the champion gave no class for
    (regression) are not judged.
    """
    from scipy.stats import norm

    answered = rows[rows[ANSWERED_COLUMN] >= 0] if ANSWERED_COLUMN in rows else rows.iloc[:0]
    if len(answered) < 2 * GUARD_MIN_ROWS:
        return None
    label = answered[_TARGET_VALUE].to_numpy(dtype=float)
    unlike = label != answered[ANSWERED_COLUMN].to_numpy(dtype=float)
    numeric = [
        c for c in answered.columns
        if c not in (SOURCE_COLUMN, EVENT_COLUMN, ANSWERED_COLUMN, _TARGET_VALUE, target)
        and pd.api.types.is_float_dtype(answered[c])
    ]  # fmt: skip
    tests = max(1, len(numeric) * GUARD_BINS)
    threshold = norm.isf(GUARD_ALPHA / tests)
    worst = None
    for name in numeric:
        values = answered[name].to_numpy(dtype=float)
        edges = np.unique(np.nanquantile(values, np.linspace(0, 1, GUARD_BINS + 1)))
        bins = np.clip(np.searchsorted(edges, values, side="right") - 1, 0, len(edges) - 2)
        for b in range(len(edges) - 1):
            inside = bins == b
            n_in, n_out = int(inside.sum()), int((~inside).sum())
            if n_in < GUARD_MIN_ROWS or n_out < GUARD_MIN_ROWS:
                continue
            p_in, p_out = unlike[inside].mean(), unlike[~inside].mean()
            pooled = unlike.mean()
            spread = np.sqrt(pooled * (1 - pooled) * (1 / n_in + 1 / n_out))
            z = (p_in - p_out) / spread if spread > 0 else 0.0
            if p_in - p_out >= GUARD_EFFECT and z > threshold and (worst is None or z > worst[0]):
                worst = (z, name, edges[b], edges[b + 1], p_in, n_in, p_out)
    if worst is None:
        return None
    _, name, low, high, p_in, n_in, p_out = worst
    return (
        f"{p_in:.0%} of the {n_in} unverified labels with {name} in [{low:.4g}, {high:.4g}] "
        f"contradict the champion's answer, {p_out:.0%} elsewhere"
    )


def window_training_rows(
    config: ProjectConfig,
    window: tuple[str, str],
    features: list[str],
    target: str,
    like: pd.DataFrame,
) -> pd.DataFrame:
    """The window's accepted records that have a label, as rows of the configured data:
    the features as stored, the target as the training data spells it, the event time
    in the time column (if any), in time order; and, for :func:`select_window_rows`,
    who sent each label (``SOURCE_COLUMN``) and its record's event time in microseconds
    (``EVENT_COLUMN``)."""
    from driftgate.jobs.feedback import open_label_store
    from driftgate.stores.factories import sample_store

    labels = open_label_store(config)
    try:
        labelled = labels.labelled_window(*window)
    finally:
        labels.close()
    if labelled.empty:
        return _empty(like)
    keys = ["request_id", "record_index"]
    wanted = labelled[[*keys, "label", "value", "source"]]
    pieces = []
    samples = sample_store(config)
    try:  # chunk by chunk: only the labelled records of a large window are kept
        for chunk in samples.iter_window(*window):
            rows = chunk.merge(wanted, on=keys, how="inner", sort=False)
            if rows.empty:
                continue
            missing = [name for name in features if name not in rows.columns]
            if missing:
                raise ValueError(
                    f"the window's labelled samples have no column(s) {missing}: they were "
                    "served by a version with other features, so they cannot be added to "
                    "its training data"
                )
            pieces.append(
                rows[[*keys, "timestamp", *features, "label", "value", "source", "predicted_class"]]
            )
    finally:
        samples.close()
    if not pieces:
        return _empty(like)
    rows = pd.concat(pieces, ignore_index=True)
    rows = rows.sort_values("timestamp", kind="stable").reset_index(drop=True)
    frame = rows[features].copy()
    frame[target] = _target(rows, like[target], config.model.task)
    time_column = config.data.time
    if time_column is not None and time_column in like.columns:
        moments = pd.to_datetime(rows["timestamp"], utc=True)
        if getattr(like[time_column].dtype, "tz", None) is None:
            moments = moments.dt.tz_convert(None)
        frame[time_column] = moments
    for name in features:  # the stored values, in the training data's types
        if like[name].dtype != frame[name].dtype:
            # e.g. a category seen only in production: kept as object
            with contextlib.suppress(TypeError, ValueError):
                frame[name] = frame[name].astype(like[name].dtype)
    frame[SOURCE_COLUMN] = rows["source"].astype(str).to_numpy()
    answered = pd.to_numeric(rows["predicted_class"], errors="coerce")
    frame[ANSWERED_COLUMN] = answered.fillna(-1).astype("int64").to_numpy()
    frame[_TARGET_VALUE] = rows["value"].astype(float).to_numpy()
    frame[EVENT_COLUMN] = pd.to_datetime(rows["timestamp"], utc=True).astype("int64") // 1000
    return frame


def _empty(like: pd.DataFrame) -> pd.DataFrame:
    empty = like.iloc[:0].copy()
    empty[SOURCE_COLUMN] = pd.Series(dtype=object)
    empty[EVENT_COLUMN] = pd.Series(dtype="int64")
    empty[ANSWERED_COLUMN] = pd.Series(dtype="int64")
    empty[_TARGET_VALUE] = pd.Series(dtype=float)
    return empty


def _target(rows: pd.DataFrame, trained: pd.Series, task: str) -> pd.Series:
    """The labels as the training data's target column holds them: 0/1 (binary), the
    value (regression), or the class label in the training data's type (multiclass)."""
    if task == "binary":
        return rows["value"].astype(trained.dtype if trained.dtype.kind in "iu" else "int64")
    if task == "regression":
        return rows["value"].astype(float)
    if pd.api.types.is_numeric_dtype(trained):  # integer class labels, kept as text
        return pd.to_numeric(rows["label"]).astype(trained.dtype)
    return rows["label"].astype(object)


def _append(configured: pd.DataFrame, window: pd.DataFrame) -> pd.DataFrame:
    """``configured`` then ``window``, with the configured columns in their order (a
    column the window lacks is missing there); a fresh 0..n index as the splits have.
    An empty ``configured`` (``reference: exclude``) gives the window alone."""
    window = window.reindex(columns=configured.columns)
    if configured.empty:
        return window.reset_index(drop=True)
    return pd.concat([configured, window], ignore_index=True)
