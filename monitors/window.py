"""Streaming summaries of a current window, measured against a reference profile.

A window arrives as one DataFrame or as an iterator of chunks (e.g. Parquet row
groups). Each chunk is reduced to additive counts relative to the profile, so memory
stays bounded by the profile plus one chunk, and the counts after the last chunk are
the same integers a one-shot pass would give:

* numeric: rows, NaN count, ``-inf`` / ``+inf`` counts, for every reference breakpoint
  ``v`` the number of current values ``<= v`` and ``< v`` (all KS needs, see
  ``docs/monitors.md``), the count in each reference bin, and the count and sum of
  finite current values in each gap between breakpoints (for the Wasserstein
  distance and the mean);
* categorical: rows, missing count and the count of each category.

Floating-point sums (mean, gap sums) can differ from a one-shot pass in the last bits
because the additions happen in another order; every count is exact.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from monitors.profile import (
    CategoricalProfile,
    NumericCounts,
    NumericProfile,
    ReferenceProfile,
    category_counts,
    numeric_values,
)


class MissingColumnError(KeyError):
    """The current window lacks a column the reference profile has."""

    def __init__(self, columns: list[str], chunk_index: int) -> None:
        self.columns = columns
        self.chunk_index = chunk_index
        where = "the current data" if chunk_index == 0 else f"chunk {chunk_index} of the window"
        super().__init__(
            f"{where} lacks profiled column(s) {columns}; "
            "a drift check needs every column of the reference profile"
        )

    def __str__(self) -> str:  # KeyError would print the repr of the message
        return str(self.args[0])


@dataclass
class NumericWindow(NumericCounts):
    """Additive counts of one numeric feature of the current window."""

    rows: int = 0
    missing_count: int = 0
    neg_inf_count: int = 0
    pos_inf_count: int = 0
    count_le: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    count_lt: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    bin_counts: np.ndarray = field(default_factory=lambda: np.zeros(1, dtype=np.int64))
    gap_counts: np.ndarray = field(default_factory=lambda: np.zeros(1, dtype=np.int64))
    gap_sums: np.ndarray = field(default_factory=lambda: np.zeros(1))
    finite_sum: float = 0.0
    type: str = "numeric"

    @classmethod
    def empty(cls, reference: NumericProfile) -> NumericWindow:
        k = reference.breakpoints.size
        return cls(
            count_le=np.zeros(k, dtype=np.int64),
            count_lt=np.zeros(k, dtype=np.int64),
            bin_counts=np.zeros(reference.bin_edges.size + 1, dtype=np.int64),
            gap_counts=np.zeros(k + 1, dtype=np.int64),
            gap_sums=np.zeros(k + 1),
        )

    def add(self, reference: NumericProfile, series: pd.Series) -> None:
        """Fold one chunk of the column into the counts."""
        values = numeric_values(series)
        missing = np.isnan(values)
        n_missing = int(missing.sum())
        # Sorting the chunk once turns every count below into a binary search of the
        # (small) reference arrays in it, which is faster than binning each value.
        present = np.sort(values[~missing] if n_missing else values)
        n = present.size
        neg_inf = int(np.searchsorted(present, -np.inf, side="right"))
        pos_inf = int(n - np.searchsorted(present, np.inf, side="left"))
        breakpoints = reference.breakpoints
        le = np.searchsorted(present, breakpoints, side="right")
        lt = np.searchsorted(present, breakpoints, side="left")
        edges_at = np.searchsorted(present, reference.bin_edges, side="left")

        finite_start, finite_stop = neg_inf, n - pos_inf
        # Gap g holds the current values strictly between breakpoints g-1 and g
        # (gap 0 below the first, the last gap above the last breakpoint).
        starts = np.concatenate([[finite_start], le])
        stops = np.concatenate([lt, [finite_stop]])
        cumulative = np.concatenate([[0.0], np.cumsum(present[finite_start:finite_stop])])

        self.rows += int(values.size)
        self.missing_count += n_missing
        self.neg_inf_count += neg_inf
        self.pos_inf_count += pos_inf
        self.count_le += le
        self.count_lt += lt
        self.bin_counts += np.diff(np.concatenate([[0], edges_at, [n]]))
        self.gap_counts += stops - starts
        self.gap_sums += cumulative[stops - finite_start] - cumulative[starts - finite_start]
        self.finite_sum += float(cumulative[-1])


@dataclass
class CategoricalWindow:
    """Additive counts of one categorical feature of the current window."""

    rows: int = 0
    missing_count: int = 0
    category_counts: dict[str, int] = field(default_factory=dict)
    type: str = "categorical"

    @property
    def non_missing(self) -> int:
        return self.rows - self.missing_count

    @property
    def missing_share(self) -> float:
        return self.missing_count / self.rows if self.rows else float("nan")

    def add(self, reference: CategoricalProfile, series: pd.Series) -> None:
        """Fold one chunk of the column into the counts."""
        del reference  # same signature as NumericWindow.add
        counts, missing = category_counts(series)
        self.rows += int(series.size)
        self.missing_count += missing
        for key, count in counts.items():
            self.category_counts[key] = self.category_counts.get(key, 0) + count


FeatureWindow = NumericWindow | CategoricalWindow


@dataclass
class Window:
    """Summaries of every profiled feature over the whole current window.

    Attributes:
        features: Per-feature counts, keyed and ordered like the profile.
        rows: Rows in the window.
        chunks: Number of chunks read.
        unexpected_columns: Columns of the window that the profile does not have, in
            order of first appearance (reported, not checked).
    """

    features: dict[str, FeatureWindow]
    rows: int = 0
    chunks: int = 0
    unexpected_columns: list[str] = field(default_factory=list)


def iter_chunks(current: pd.DataFrame | Iterable[pd.DataFrame]) -> Iterator[pd.DataFrame]:
    """One DataFrame as a single chunk, or the chunks of an iterable as given."""
    if isinstance(current, pd.DataFrame):
        yield current
        return
    iterator = iter(current)
    while True:
        try:
            chunk = next(iterator)
        except StopIteration:
            return
        if not isinstance(chunk, pd.DataFrame):
            raise TypeError(
                f"current must be a DataFrame or an iterable of DataFrames, "
                f"got a chunk of type {type(chunk).__name__}"
            )
        yield chunk
        # Drop our reference before the producer builds the next chunk, so that only
        # one chunk is alive at a time.
        del chunk


def summarise_window(
    profile: ReferenceProfile, current: pd.DataFrame | Iterable[pd.DataFrame]
) -> Window:
    """Reduce a window (one frame or chunks) to counts against ``profile``.

    Raises:
        MissingColumnError: A chunk lacks a profiled column (the error names it).
    """
    features: dict[str, FeatureWindow] = {}
    for name, reference in profile.features.items():
        if isinstance(reference, NumericProfile):
            features[name] = NumericWindow.empty(reference)
        else:
            features[name] = CategoricalWindow()
    window = Window(features=features)
    seen_unexpected: set[str] = set()
    for index, chunk in enumerate(iter_chunks(current)):
        absent = [name for name in profile.features if name not in chunk.columns]
        if absent:
            raise MissingColumnError(absent, index)
        for column in chunk.columns:
            column = str(column)
            if column not in profile.features and column not in seen_unexpected:
                seen_unexpected.add(column)
                window.unexpected_columns.append(column)
        for name, reference in profile.features.items():
            window.features[name].add(reference, chunk[name])
        window.rows += len(chunk)
        window.chunks += 1
        del chunk  # see iter_chunks: one chunk alive at a time
    return window
