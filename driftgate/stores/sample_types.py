"""What the sample store takes and gives: a sample, a window's size, a retention
pass's result, the per-client missing tallies (:mod:`driftgate.stores.samples`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Protocol

import pandas as pd

from driftgate.stores._sql import (
    StoreError,
)


@dataclass(frozen=True)
class Sample:
    """One scored record.

    Attributes:
        timestamp: When the record happened (the request's time unless the client
            supplied one); windows select on it.
        request_id: The request's id; every record of a request shares it.
        record_index: Position of the record in its request.
        model_name: Registered model name.
        model_version: The version that scored it.
        features: The record as received (field -> number, or a string for a
            categorical field).
        prediction: binary: P(class 1); multiclass: the top class's probability;
            regression: the predicted value.
        predicted_class: binary: 0 or 1; multiclass: the class's index into the
            version's classes; regression: -1.
        received_at: When the service received it (default: ``timestamp``).
        predicted_label: multiclass: the predicted class's label; None otherwise.
        sample_fraction: The share of requests the service logs
            (``serving.sample_fraction``) when it stored this one.
        client: The caller's key (:meth:`RequestSampling.client_key`), or None.
    """

    timestamp: datetime
    request_id: str
    record_index: int
    model_name: str
    model_version: str
    features: Mapping[str, float | int | str | None]
    prediction: float
    predicted_class: int
    received_at: datetime | None = field(default=None)
    predicted_label: str | None = field(default=None)
    sample_fraction: float = 1.0
    client: str | None = None


@dataclass
class ClientMissing:
    """One client's rows in a window and its missing values per feature
    (:meth:`SqlSampleStore.missing_by_client`)."""

    client: str
    rows: int = 0
    missing: dict[str, int] = field(default_factory=dict)


class DuplicateRequestIds(StoreError):
    """Samples were refused because their request ids are already in the store."""

    def __init__(self, request_ids: set[str]) -> None:
        super().__init__(f"{len(request_ids)} request id(s) already stored")
        self.request_ids = request_ids


class SampleWindowReader(Protocol):
    """Anything the drift check can read a window of production samples from."""

    def read_window(self, start: object, end: object) -> pd.DataFrame:
        """Samples with ``start <= timestamp < end``, ordered by time."""
        ...


@dataclass(frozen=True)
class WindowStats:
    """How many samples a window holds, and how many requests stand behind them.

    Attributes:
        rows: Samples stored in the window.
        estimated_records: Records served in the window, estimated as the sum of
            ``1 / sample_fraction`` over its samples (``rows`` when every one was kept).
        min_fraction / max_fraction: The sampling fractions in force (1.0 when none).
    """

    rows: int
    estimated_records: float
    min_fraction: float = 1.0
    max_fraction: float = 1.0


@dataclass(frozen=True)
class PurgeResult:
    """What one retention pass removed, and what it kept because it was protected."""

    cutoff: pd.Timestamp
    deleted_rows: int = 0
    dropped_partitions: list[str] = field(default_factory=list)
    kept_partitions: list[str] = field(default_factory=list)  # old but protected
    busy_partitions: list[str] = field(default_factory=list)  # old, locked by a reader now
    protected: list[tuple[str, str]] = field(default_factory=list)
    deleted_labels: int = 0  # labels whose sample went (stores.labels, jobs.retention)
    traffic_deleted_rows: int = 0  # rejected records, overflow minutes, requests log

    def to_dict(self) -> dict:
        return {
            "cutoff": self.cutoff.isoformat(),
            "deleted_rows": self.deleted_rows,
            "deleted_labels": self.deleted_labels,
            "traffic_deleted_rows": self.traffic_deleted_rows,
            "dropped_partitions": list(self.dropped_partitions),
            "kept_partitions": list(self.kept_partitions),
            "busy_partitions": list(self.busy_partitions),
            "protected": [list(p) for p in self.protected],
        }
