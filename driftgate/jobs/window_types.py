"""What the drift check's steps hand each other: the window (:class:`WindowSamples`),
the decision (:class:`Decision`) and the verdict (:class:`WindowVerdict`), and how a
window's rows stream from the sample store as the profiled features.

Its own module, below the steps, so that the step modules (``drift_check`` with the
journey, ``window_record``, ``window_report``) import the types and never each other
back (``tests/test_layers.py`` fails on any import cycle).
"""

from __future__ import annotations

import logging
import time
import weakref
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from driftgate.monitors.actions import ActionTaken
from driftgate.monitors.hysteresis import Firing
from driftgate.monitors.results import MonitorResult
from driftgate.stores.factories import sample_store_at

log = logging.getLogger(__name__)


@dataclass
class WindowVerdict:
    model_name: str
    model_version: str
    start: pd.Timestamp
    end: pd.Timestamp
    rows: int
    contract_passed: bool | None
    results: list[MonitorResult]
    firings: dict[str, Firing]
    actions: list[ActionTaken] = field(default_factory=list)
    run_id: str | None = None
    drift_metrics: dict[str, float] = field(default_factory=dict)
    report_dir: Path | None = None
    evidently_report: Path | None = None  # written by the last step (window_report)
    # Reviews to which this window's refused traffic added a contract revision proposal
    # (a person accepts it: the CLI, or the revise-contract flow the drift-check flow starts).
    proposals: list[str] = field(default_factory=list)

    @property
    def breached(self) -> list[str]:
        return [r.monitor for r in self.results if r.breached]

    def to_summary(self) -> dict:
        """JSON-able: window, rows, breaches, actions, run id, report path, and each
        monitor's result (``monitors``: name -> :meth:`MonitorResult.to_dict`)."""
        return {
            "window": [self.start.isoformat(), self.end.isoformat()],
            "rows": self.rows,
            "model_version": self.model_version,
            "breached": self.breached,
            "insufficient_data": [
                r.monitor for r in self.results if r.status == "insufficient_data"
            ],
            "actions": [a.__dict__ for a in self.actions],
            "run_id": self.run_id,
            "report": str(self.report_dir / "summary.md") if self.report_dir else None,
            "evidently_report": str(self.evidently_report) if self.evidently_report else None,
            "metrics": self.drift_metrics,
            "monitors": {r.monitor: r.to_dict() for r in self.results},
        }

    def summary_rows(self) -> list[dict]:
        return [
            {
                "monitor": r.monitor,
                "metric": r.metric,
                "observed": "-" if r.observed is None else f"{r.observed:.4g}",
                "threshold": f"{r.threshold:g}",
                "status": r.status,
                "breached": r.breached,
                "consecutive": self.firings[r.monitor].consecutive
                if r.monitor in self.firings
                else 0,
                "fired": self.firings[r.monitor].fire if r.monitor in self.firings else False,
                "p": "-" if r.p_value is None else f"{r.p_value:.2g}",
                "level": "-" if r.level is None else f"{r.level:.2g}",
                "corrected": "-" if r.bias_corrected is None else f"{r.bias_corrected:.3g}",
                "detectable": "-" if r.min_detectable is None else f"{r.min_detectable:.3g}",
                "floor": "-" if r.effect_size_floor is None else f"{r.effect_size_floor:g}",
                "features": ", ".join(r.breached_features),
                "action": r.action,
                "why": self._why(r),
            }
            for r in self.results
        ]

    def _why(self, result: MonitorResult) -> str:
        """Why a result is what it is: a breach that did not fire, too few rows."""
        firing = self.firings.get(result.monitor)
        if result.breached and firing is not None and not firing.fire:
            return firing.why or "did not fire"
        acted = [a for a in self.actions if a.monitor == result.monitor and not a.changed]
        if acted:
            return f"already acted on this window: {acted[0].detail}"
        if "concentration" in result.details:  # a pause downgraded: whose values they were
            return result.details["concentration"]
        if result.status != "ok" or result.labels is not None:  # performance: the figures
            return result.reason
        if "evidence" in result.details:  # a pooled breach: over which span it was found
            return result.reason
        return ""

    def markdown(self) -> str:
        contract = {True: "passed", False: "FAILED", None: "not checked"}[self.contract_passed]
        columns = (
            "monitor",
            "metric",
            "observed",
            "threshold",
            "status",
            "breached",
            "corrected",
            "p",
            "level",
            "detectable",
            "floor",
            "consecutive",
            "fired",
            "features",
            "why",
        )
        lines = [
            f"# Drift check {self.model_name} v{self.model_version}: {self.start} .. {self.end}",
            "",
            f"{self.rows} rows; contract {contract}; MLflow run {self.run_id or '-'}",
            "",
            "| " + " | ".join(columns) + " |",
            "|" + "---|" * len(columns),
        ]
        for row in self.summary_rows():
            lines.append("| " + " | ".join(str(row[c]) for c in columns) + " |")
        if self.evidently_report:
            lines += ["", f"Evidently report: {self.evidently_report}"]
        if self.actions:
            lines += ["", "Actions:"]
            lines += [f"- {a.monitor}: {a.action} — {a.detail}" for a in self.actions]
        return "\n".join(lines) + "\n"


@dataclass
class WindowSamples:
    """What the drift check's ``read`` step returns: the champion, its profile and the
    window's samples.

    A window of at most ``monitoring.contract_rows`` samples is held whole. A larger
    one is not: ``samples`` / ``current`` are an even sample of it (for the contract
    and the Evidently report), ``chunks`` streams every row's features from the store
    for the summary, and ``row_count`` is the window's true size.
    """

    model_name: str
    model_version: str
    start: pd.Timestamp
    end: pd.Timestamp
    profile: object  # monitors.profile.ReferenceProfile
    samples: pd.DataFrame  # as stored (every column, for the contract)
    current: pd.DataFrame  # the profiled features (numbers; categories as values)
    row_count: int | None = None  # the whole window's rows (default: len(current))
    # Records served in the window: sum of 1 / serving.sample_fraction over its samples.
    estimated_records: float | None = None
    sample_fraction: float = 1.0  # the smallest fraction in force in the window
    # Where a streamed window is read from, and its lease: plain data, so the window
    # pickles (Prefect's Dask runner ships the task context that holds it).
    store_url: str | None = None
    sqlite_synchronous: str = "FULL"
    lease_id: str | None = None
    stream: bool = False  # True: summarise reads every row from the store in chunks
    chunk_rows: int = 0
    # Rejected records, overflow and requests of the window (sample store only; the
    # traffic monitors read it, monitors.traffic).
    traffic: object | None = None  # monitors.traffic.TrafficCounts

    def __post_init__(self) -> None:
        # The one sample store every read of the window shares (its chunks, rejected
        # records, the concentration check, the lease), opened by the ``read`` step
        # and closed by :meth:`close`. Not fields, so that dataclasses.asdict never
        # copies a connection pool, and never pickled: a copy opens its own on first
        # use, once per process, and closes it when the copy is collected (nothing else
        # closes a copy).
        self._store = None
        self._closer = None

    def __getstate__(self) -> dict:
        return {**self.__dict__, "_store": None, "_closer": None}

    @property
    def rows(self) -> int:
        return len(self.current) if self.row_count is None else self.row_count

    @property
    def sampled(self) -> bool:
        """True when ``samples`` is an even sample of a larger window."""
        return self.stream

    def use_store(self, store) -> None:
        """Make ``store`` (a SqlSampleStore at ``store_url``) the window's store; the
        window closes it."""
        self._store = store
        self._closer = weakref.finalize(self, store.close)

    def store(self):
        """The window's sample store: opened at most once per process."""
        if self._store is None:
            self.use_store(
                sample_store_at(self.store_url, sqlite_synchronous=self.sqlite_synchronous)
            )
        return self._store

    def chunks(self) -> Iterator[pd.DataFrame]:
        """Every row's profiled features, streamed from the store in chunks."""
        yield from stream_features(
            self.store(), self.start, self.end, dict(self.profile.schema), self.chunk_rows,
            self.lease_id,
        )  # fmt: skip

    def rejected_chunks(self) -> Iterator[pd.DataFrame]:
        """The profiled features of the window's rejected records, in chunks (none when
        the window was read from files)."""
        if self.store_url is None:
            return
        schema = dict(self.profile.schema)
        for chunk in self.store().iter_rejected(
            self.start, self.end, chunk_rows=self.chunk_rows or 100_000
        ):
            yield features_frame(chunk, schema)

    def close(self) -> None:
        """End the retention lease (if any) and close the window's store; idempotent."""
        lease_id, self.lease_id = self.lease_id, None
        try:
            if lease_id is not None:
                self.store().release(lease_id)
        except Exception as exc:  # the lease expires on its own
            log.warning("retention lease on %s..%s not released: %s", self.start, self.end, exc)
        finally:
            closer, self._store, self._closer = self._closer, None, None
            if closer is not None:
                closer()  # once: a finalizer runs at most once


@dataclass
class Decision:
    """What the ``decide`` step returns: every monitor's result and the evidence report."""

    results: list[MonitorResult]
    evidence: object  # monitors.DriftReport over the evidence statistics


def features_frame(window: pd.DataFrame, schema: dict[str, str]) -> pd.DataFrame:
    """The profiled features, numeric ones as numbers and categorical ones as their
    values (the categories the service stored). A profiled column absent from a window
    that has rows is an error naming it (MissingColumnError, exit 2): counting it as
    100% missing once paused production for a file whose column names differed from
    the model's. A sensor that went silent sends its column with missing values, which
    the missing-share monitors see."""
    from driftgate.monitors import MissingColumnError

    absent = [name for name in schema if name not in window.columns]
    if absent and len(window):
        raise MissingColumnError(
            absent,
            0,
            where=f"the window's samples (columns: {', '.join(map(str, window.columns))})",
        )
    if list(window.columns) == list(schema) and all(
        kind == "numeric" and window[name].dtype == np.float64 for name, kind in schema.items()
    ):
        return window  # already the profiled numbers (a streamed chunk): no copy
    frame = pd.DataFrame(index=window.index)
    for name, kind in schema.items():
        if name not in window.columns:
            frame[name] = np.nan if kind == "numeric" else pd.Series(None, index=window.index)
        elif kind == "numeric":
            frame[name] = pd.to_numeric(window[name], errors="coerce")
        else:
            frame[name] = window[name].astype(object).where(window[name].notna(), None)
    return frame


def stream_features(
    reader,
    start,
    end,
    schema: dict[str, str],
    chunk_rows: int,
    lease,
    without_client: str | None = None,
    model_version: str | None = None,
) -> Iterator[pd.DataFrame]:
    """The window's profiled features in chunks of ``chunk_rows`` (every client's, or
    all but ``without_client``'s), renewing the lease as it goes (a long read outlives
    no lease)."""
    renewed = time.monotonic()
    for chunk in reader.iter_window(
        start,
        end,
        chunk_rows=chunk_rows,
        features_only=True,
        without_client=without_client,
        model_version=model_version,
    ):
        if lease is not None and time.monotonic() - renewed > 60:
            reader.renew(lease)
            renewed = time.monotonic()
        yield features_frame(chunk, schema)
        del chunk
