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

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from driftgate.core.errors import DriftgateError
from driftgate.monitors.profile import (
    CategoricalProfile,
    NumericCounts,
    NumericProfile,
    ReferenceProfile,
    category_counts,
    numeric_values,
)


class MissingColumnError(DriftgateError, KeyError):
    """The current window lacks a column the reference profile has."""

    def __init__(self, columns: list[str], chunk_index: int, where: str | None = None) -> None:
        self.columns = columns
        self.chunk_index = chunk_index
        if where is None:
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
        """Fold one chunk of the column into the counts.

        The temporaries are few and short-lived (arrays of the profile's breakpoints
        are filled in place, the sorted chunk is dropped once summed): a streamed
        window's peak memory is the counts plus one chunk plus these, and they used
        to weigh as much as the chunk itself. The arithmetic is the same, so the
        counts and sums are the same, bit for bit.
        """
        values = numeric_values(series)
        missing = np.isnan(values)
        n_missing = int(missing.sum())
        # Sorting the chunk once turns every count below into a binary search of the
        # (small) reference arrays in it, which is faster than binning each value.
        if n_missing:
            present = values[~missing]
            present.sort()
        else:
            present = np.sort(values)
        del missing
        n = present.size
        neg_inf = int(np.searchsorted(present, -np.inf, side="right"))
        pos_inf = int(n - np.searchsorted(present, np.inf, side="left"))
        finite_start, finite_stop = neg_inf, n - pos_inf
        breakpoints = reference.breakpoints
        # Gap g holds the current values strictly between breakpoints g-1 and g
        # (gap 0 below the first, the last gap above the last breakpoint): it starts
        # at the count <= breakpoint g-1 and stops at the count < breakpoint g.
        starts = np.empty(breakpoints.size + 1, dtype=np.intp)
        stops = np.empty(breakpoints.size + 1, dtype=np.intp)
        starts[0], stops[-1] = finite_start, finite_stop
        starts[1:] = np.searchsorted(present, breakpoints, side="right")
        stops[:-1] = np.searchsorted(present, breakpoints, side="left")
        edges_at = np.searchsorted(present, reference.bin_edges, side="left")
        cumulative = np.empty(finite_stop - finite_start + 1)
        cumulative[0] = 0.0
        np.cumsum(present[finite_start:finite_stop], out=cumulative[1:])
        del present

        self.rows += int(values.size)
        self.missing_count += n_missing
        self.neg_inf_count += neg_inf
        self.pos_inf_count += pos_inf
        self.count_le += starts[1:]
        self.count_lt += stops[:-1]
        self.bin_counts += np.diff(np.concatenate([[0], edges_at, [n]]))
        self.gap_counts += stops
        self.gap_counts -= starts
        starts -= finite_start
        stops -= finite_start
        sums = cumulative[stops]
        sums -= cumulative[starts]
        self.gap_sums += sums
        self.finite_sum += float(cumulative[-1])

    def merge(self, other: NumericWindow) -> None:
        """Fold the counts of another part of the same window (same reference) into these.

        Adding parts in the order a one-shot pass reads them gives the same floats as
        that pass: the sums are accumulated in the same order.
        """
        self.rows += other.rows
        self.missing_count += other.missing_count
        self.neg_inf_count += other.neg_inf_count
        self.pos_inf_count += other.pos_inf_count
        self.count_le += other.count_le
        self.count_lt += other.count_lt
        self.bin_counts += other.bin_counts
        self.gap_counts += other.gap_counts
        self.gap_sums += other.gap_sums
        self.finite_sum += other.finite_sum


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
        self._add_counts(counts)

    def merge(self, other: CategoricalWindow) -> None:
        """Fold the counts of another part of the same window into these."""
        self.rows += other.rows
        self.missing_count += other.missing_count
        self._add_counts(other.category_counts)

    def _add_counts(self, counts: dict[str, int]) -> None:
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


def empty_window(profile: ReferenceProfile, features: Sequence[str] | None = None) -> Window:
    """Zero counts for ``features`` of ``profile`` (default: all, in profile order)."""
    names = list(profile.features) if features is None else list(features)
    unknown = [name for name in names if name not in profile.features]
    if unknown:
        raise ValueError(
            f"features not in the profile: {unknown}; profiled: {list(profile.features)}"
        )
    windows: dict[str, FeatureWindow] = {}
    for name in names:
        reference = profile.features[name]
        if isinstance(reference, NumericProfile):
            windows[name] = NumericWindow.empty(reference)
        else:
            windows[name] = CategoricalWindow()
    return Window(features=windows)


def summarise_window(
    profile: ReferenceProfile,
    current: pd.DataFrame | Iterable[pd.DataFrame],
    features: Sequence[str] | None = None,
) -> Window:
    """Reduce a window (one frame or chunks) to counts against ``profile``.

    ``features`` restricts the summary to some profiled features (a scale-out task
    summarises one group of features of one part of the window); default: all.

    Raises:
        MissingColumnError: A chunk lacks a summarised column (the error names it).
    """
    window = empty_window(profile, features)
    for chunk in iter_chunks(current):
        add_chunk(profile, window, chunk)
        del chunk  # see iter_chunks: one chunk alive at a time
    return window


def add_chunk(profile: ReferenceProfile, window: Window, chunk: pd.DataFrame) -> None:
    """Fold one chunk into ``window``'s counts (of the features it was made for).

    Raises:
        MissingColumnError: The chunk lacks a summarised column.
    """
    absent = [name for name in window.features if name not in chunk.columns]
    if absent:
        raise MissingColumnError(absent, window.chunks)
    for column in chunk.columns:
        column = str(column)
        if column not in profile.features and column not in window.unexpected_columns:
            window.unexpected_columns.append(column)
    for name, counts in window.features.items():
        counts.add(profile.features[name], chunk[name])
    window.rows += len(chunk)
    window.chunks += 1


def _group_rows(groups: Sequence[Window], where: str = "") -> tuple[list[str], int]:
    """The features of summaries of disjoint groups over the same rows, and those rows."""
    names = [name for group in groups for name in group.features]
    if len(set(names)) != len(names):
        raise ValueError(f"{where}feature groups overlap ({names})")
    rows = {group.rows for group in groups}
    if len(rows) > 1:
        raise ValueError(f"{where}feature groups disagree on its rows {sorted(rows)}")
    return names, rows.pop() if rows else 0


def _add_unexpected(window: Window, groups: Sequence[Window]) -> None:
    for group in groups:
        for column in group.unexpected_columns:
            if column not in window.unexpected_columns:
                window.unexpected_columns.append(column)


def join_groups(profile: ReferenceProfile, groups: Sequence[Window]) -> Window:
    """One window from the summaries of disjoint groups of features over the same rows,
    sharing their counts (not copied: as large as the profile); features in profile
    order, like :func:`merge_windows` over one slice.

    Raises:
        ValueError: The groups overlap or disagree on the rows.
    """
    _, rows = _group_rows(groups)
    counts = {name: c for group in groups for name, c in group.features.items()}
    joined = Window(
        features={name: counts[name] for name in profile.features if name in counts},
        rows=rows,
        chunks=max((group.chunks for group in groups), default=0),
    )
    _add_unexpected(joined, groups)
    return joined


def merge_windows(profile: ReferenceProfile, slices: Iterable[Sequence[Window]]) -> Window:
    """One window from the summaries of its parts.

    ``slices`` holds, for each consecutive slice of the window's rows in row order, the
    summaries of that slice's groups of features (disjoint groups, together covering
    the same features in every slice). Counts add up; floating-point sums are added
    slice by slice in row order, so the result equals :func:`summarise_window` over the
    same slices as chunks, bit for bit.

    Raises:
        ValueError: The groups of a slice overlap or disagree on its rows, or two
            slices cover different features.
    """
    merged: Window | None = None
    for index, groups in enumerate(slices):
        names, rows = _group_rows(groups, f"slice {index}: ")
        if merged is None:
            merged = empty_window(profile, [n for n in profile.features if n in set(names)])
        elif set(names) != set(merged.features):
            raise ValueError(
                f"slice {index} covers {sorted(names)}, the first slice {sorted(merged.features)}"
            )
        for group in groups:
            for name, counts in group.features.items():
                merged.features[name].merge(counts)
        _add_unexpected(merged, groups)
        merged.rows += rows
        merged.chunks += max((group.chunks for group in groups), default=0)
        del groups  # a slice's counts weigh as much as the profile: not two at a time
    return merged if merged is not None else empty_window(profile)
