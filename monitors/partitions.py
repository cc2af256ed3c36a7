"""A window in parts: slices of rows times groups of features, summarised apart, merged.

The scale-out of a drift check. A window is cut into *parts* — consecutive slices of
its rows, each a DataFrame in memory or a Parquet file on shared storage — and its
features into *groups*. Each (part, group) cell is summarised on its own by
:func:`summarise_part`, in this process or as a task on a Dask cluster (the caller
chooses the ``mapper``: see ``flows/drift_check.py``), and the cells are merged in row
order by :func:`monitors.window.merge_windows`. Because every mapper runs the same
function on the same cells and the merge adds them in the same order, the in-process
and the distributed paths give the same counts and the same floats, bit for bit.

Memory per cell is one part's columns of one group (a Parquet part is read one row
group at a time); the driver holds only counts. A window streamed from the sample
store (:func:`summarise_stream`) hands its chunks to the mapper one at a time, so
the driver holds one chunk and the counts, whatever the window's size.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path

import pandas as pd

from driftgate.monitors.profile import ReferenceProfile
from driftgate.monitors.window import (
    MissingColumnError,
    Window,
    add_chunk,
    empty_window,
    join_groups,
    merge_windows,
    summarise_window,
)

WindowPart = pd.DataFrame | str | Path  # rows in memory, or a Parquet file of them
Cell = tuple[WindowPart, list[str]]  # one part, one group of features
# Summarises every cell, returning the windows in the order of the cells.
Mapper = Callable[[ReferenceProfile, list[Cell]], list[Window]]


def feature_groups(features: Sequence[str], groups: int) -> list[list[str]]:
    """``features`` cut into at most ``groups`` contiguous groups of near-equal size."""
    if groups < 1:
        raise ValueError(f"groups must be at least 1, got {groups}")
    names = list(features)
    count = min(groups, len(names)) or 1
    size, extra = divmod(len(names), count)
    cut, start = [], 0
    for index in range(count):
        stop = start + size + (1 if index < extra else 0)
        cut.append(names[start:stop])
        start = stop
    return cut


def row_slices(frame: pd.DataFrame, rows: int) -> list[pd.DataFrame]:
    """``frame`` as consecutive slices of at most ``rows`` rows (one slice if empty)."""
    if rows < 1:
        raise ValueError(f"rows per slice must be at least 1, got {rows}")
    if len(frame) <= rows:
        return [frame]
    return [frame.iloc[start : start + rows] for start in range(0, len(frame), rows)]


def read_part(part: WindowPart, columns: list[str]) -> Iterator[pd.DataFrame]:
    """The ``columns`` of one part: the frame itself, or a Parquet file row group by row
    group (never the whole file at once)."""
    if isinstance(part, pd.DataFrame):
        yield part
        return
    import pyarrow.parquet as pq

    path = Path(part)
    try:
        reader = pq.ParquetFile(path)
    except (OSError, ValueError) as exc:  # missing file, not Parquet
        raise ValueError(f"{path}: cannot read window part: {exc}") from exc
    absent = [name for name in columns if name not in reader.schema_arrow.names]
    if absent:
        raise MissingColumnError(absent, 0, where=str(path))
    for group in range(reader.num_row_groups):
        yield reader.read_row_group(group, columns=columns).to_pandas()


def summarise_part(profile: ReferenceProfile, part: WindowPart, features: list[str]) -> Window:
    """Counts of ``features`` over one part of a window (one cell of the grid)."""
    return summarise_window(profile, read_part(part, features), features)


def summarise_in_process(profile: ReferenceProfile, cells: list[Cell]) -> list[Window]:
    """The default mapper: every cell, one after the other, in this process."""
    return [summarise_part(profile, part, features) for part, features in cells]


def summarise_parts(
    profile: ReferenceProfile,
    parts: Sequence[WindowPart],
    groups: Sequence[Sequence[str]] | None = None,
    mapper: Mapper = summarise_in_process,
) -> Window:
    """Summarise a window given in ``parts`` (row order) over ``groups`` of features.

    Args:
        profile: The reference profile the counts are measured against.
        parts: Consecutive slices of the window's rows, in order.
        groups: Disjoint groups of profiled features (default: one group of all).
        mapper: Runs :func:`summarise_part` on every cell and returns the windows in
            cell order: :func:`summarise_in_process`, or a distributed one.

    Returns:
        The merged window, equal to summarising the parts one after another.
    """
    groups = [list(profile.features)] if groups is None else [list(g) for g in groups]
    cells: list[Cell] = [(part, group) for part in parts for group in groups]
    windows = mapper(profile, cells)
    if len(windows) != len(cells):
        raise ValueError(f"the mapper returned {len(windows)} windows for {len(cells)} cells")
    per_part = len(groups)
    return merge_windows(
        profile, (windows[i : i + per_part] for i in range(0, len(windows), per_part))
    )


def summarise_stream(
    profile: ReferenceProfile,
    parts: Iterable[WindowPart],
    groups: Sequence[Sequence[str]] | None = None,
    mapper: Mapper = summarise_in_process,
) -> Window:
    """:func:`summarise_parts` over parts that arrive one by one (chunks streamed from
    a store): each part's cells go to ``mapper`` as soon as the part arrives, and the
    part is dropped before the next one is read. Same cells, same merge order, so the
    result equals :func:`summarise_parts` over the same parts, bit for bit.

    A mapper with a ``session()`` (a context manager yielding a mapper: one Dask
    runner for the whole stream) is used through it.
    """
    groups = [list(profile.features)] if groups is None else [list(g) for g in groups]
    if mapper is summarise_in_process:
        # In this process every chunk is folded straight into one running window per
        # group: a cell's counts (as large as the profile) are never made and merged
        # chunk by chunk. Same additions in the same order (a cell's sums start from
        # zero, and 0.0 + x == x), so the same floats as the cells merged, bit for bit.
        windows = [empty_window(profile, group) for group in groups]
        for part in parts:
            for window in windows:
                for chunk in read_part(part, list(window.features)):
                    add_chunk(profile, window, chunk)
                    del chunk
            del part
        return join_groups(profile, windows)
    opener = getattr(mapper, "session", None)
    session = opener() if opener is not None else contextlib.nullcontext(mapper)

    def slices(mapped: Mapper) -> Iterator[list[Window]]:
        for part in parts:
            windows = mapped(profile, [(part, group) for group in groups])
            if len(windows) != len(groups):
                raise ValueError(
                    f"the mapper returned {len(windows)} windows for {len(groups)} cells"
                )
            del part
            yield windows
            del windows  # merged by now: free before the next part is read

    with session as mapped:
        return merge_windows(profile, slices(mapped))
