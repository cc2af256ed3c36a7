"""The columnar encoding of the sample store: a sample's features to a float64 blob
and a JSON list of its other values, and fetched rows back to chunk frames, each
value copied once (:mod:`driftgate.stores.samples`, "Layout")."""

from __future__ import annotations

import contextlib
import gc
import json
import math
import struct
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from driftgate.stores.sample_tables import (
    LAYOUT_COLUMNAR,
    META_COLUMNS,
    NUMBER,
    OTHER,
    OUTPUT_COLUMNS,
    TIMESTAMP,
)


def _json_value(value):
    # JSON has no NaN/Infinity; store them as null (the validator rejects them anyway).
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


# -- the columnar encoding -----------------------------------------------------------------
_STRUCTS: dict[int, struct.Struct] = {}
_PLAIN_NUMBERS = (float, int)


def _struct(count: int) -> struct.Struct:
    packer = _STRUCTS.get(count)
    if packer is None:
        packer = _STRUCTS[count] = struct.Struct(f"<{count}d")
    return packer


def _encode(features: Mapping) -> tuple[tuple, bytes, str | None]:
    """(schema key, numbers blob, others JSON) of one sample's features.

    A number (or None, or a non-finite float: stored as null, i.e. NaN) goes to the
    float64 blob; anything else — a categorical string, a boolean — is kept as it came,
    in JSON, so a string is read back as the same string.
    """
    key, numbers, others = [], [], []
    for name, value in features.items():
        kind = type(value)
        if kind in _PLAIN_NUMBERS or value is None:
            numbers.append(float(value) if value is not None else math.nan)
            key.append((name, NUMBER))
        elif isinstance(value, (float, int)) and not isinstance(value, bool):  # numpy scalars
            numbers.append(float(value))
            key.append((name, NUMBER))
        else:
            others.append(_json_value(value))
            key.append((name, OTHER))
    numbers = [v if math.isfinite(v) else math.nan for v in numbers]
    blob = _struct(len(numbers)).pack(*numbers)
    return tuple(key), blob, (json.dumps(others, allow_nan=False) if others else None)


def _decode(
    schema_ids: Sequence[int],
    numbers: Sequence[bytes],
    others: Sequence[str | None],
    schemas: Mapping[int, tuple],
) -> dict[str, np.ndarray]:
    """Feature columns (union, in order of first appearance) of rows in columnar layout."""
    n = len(schema_ids)
    ids = np.asarray(schema_ids, dtype=np.int64)
    distinct, first = np.unique(ids, return_index=True)
    order = [int(distinct[i]) for i in np.argsort(first)]
    single = len(order) == 1
    columns: dict[str, np.ndarray] = {}
    for schema_id in order:
        fields = schemas[schema_id]
        rows = None if single else np.flatnonzero(ids == schema_id)
        numeric = [name for name, kind in fields if kind == NUMBER]
        other = [name for name, kind in fields if kind == OTHER]
        if numeric:
            blob = b"".join(numbers) if single else b"".join([numbers[i] for i in rows])
            matrix = np.frombuffer(blob, dtype="<f8").reshape(-1, len(numeric))
            for j, name in enumerate(numeric):
                if single:
                    columns[name] = matrix[:, j].copy()
                    continue
                column = columns.get(name)
                if column is None:
                    column = columns[name] = np.full(n, np.nan)
                column[rows] = matrix[:, j]
        if other:
            taken = others if single else [others[i] for i in rows]
            values = [json.loads(item) for item in taken]
            for j, name in enumerate(other):
                column = columns.get(name)
                if column is None:
                    column = columns[name] = np.full(n, np.nan, dtype=object)
                elif column.dtype != object:
                    column = columns[name] = column.astype(object)
                picked = [row[j] for row in values]
                if single:
                    column[:] = picked
                else:
                    column[rows] = picked
    return columns


def _empty_window() -> pd.DataFrame:
    frame = pd.DataFrame({name: pd.Series(dtype=object) for name in META_COLUMNS + OUTPUT_COLUMNS})
    for name in (TIMESTAMP, "received_at"):
        frame[name] = pd.to_datetime(frame[name], utc=True)
    return frame


def _frame(meta: dict | None, features: pd.DataFrame, outputs: dict | None) -> pd.DataFrame:
    clashing = [c for c in features.columns if c in META_COLUMNS + OUTPUT_COLUMNS]
    if clashing:  # renaming copies: only when needed
        features = features.rename(columns={c: f"feature.{c}" for c in clashing})
    if meta is None:
        return features
    return pd.concat([pd.DataFrame(meta), features, pd.DataFrame(outputs)], axis=1)


@contextlib.contextmanager
def _gc_paused() -> Iterator[None]:
    """No cyclic garbage collection while rows are fetched and decoded.

    Fetching creates a tuple per row; the collector, triggered by every few hundred
    new tuples, then walks every live object, which tripled the time of a streamed
    read (measured: 1.9 s vs 0.67 s for 200k rows). The rows hold no cycles and are
    freed by reference counting; the previous state is restored after each fetch,
    so the consumer of a chunk runs with the collector as it was.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


@dataclass
class _Piece:
    rows: int
    features: dict[str, np.ndarray]
    meta: dict | None


def _assemble(pieces: list[_Piece]) -> pd.DataFrame:
    """One chunk frame from its pieces, copying each value once: numeric features go
    straight into one preallocated float64 matrix that the frame then uses as is."""
    n = sum(piece.rows for piece in pieces)
    names: dict[str, bool] = {}  # feature -> numeric in every piece that has it
    for piece in pieces:
        for name, column in piece.features.items():
            names[name] = names.get(name, True) and column.dtype != object
    numeric = [name for name, is_number in names.items() if is_number]
    matrix = np.full((n, len(numeric)), np.nan)
    objects = {name: np.full(n, np.nan, dtype=object) for name, ok in names.items() if not ok}
    offset = 0
    position = {name: j for j, name in enumerate(numeric)}
    for piece in pieces:
        stop = offset + piece.rows
        for name, column in piece.features.items():
            if name in position:
                matrix[offset:stop, position[name]] = column
            else:
                objects[name][offset:stop] = column
        piece.features.clear()  # each value is held once: in the chunk, not also here
        offset = stop
    if objects:
        data = {name: matrix[:, position[name]] if name in position else objects[name]
                for name in names}  # fmt: skip
        features = pd.DataFrame(data)
    else:
        features = pd.DataFrame(matrix, columns=numeric, copy=False)
    if pieces[0].meta is None:
        return _frame(None, features, None)

    def joined(key):
        parts = [piece.meta[key] for piece in pieces]
        if isinstance(parts[0], np.ndarray):
            return np.concatenate(parts)
        return [value for part in parts for value in part]

    meta = {
        TIMESTAMP: pd.to_datetime(joined("ts_us"), unit="us", utc=True),
        "received_at": pd.to_datetime(joined("received_us"), unit="us", utc=True),
        **{key: joined(key) for key in ("model_name", "model_version", "request_id")},
        "record_index": joined("record_index"),
    }
    outputs = {key: joined(key) for key in OUTPUT_COLUMNS}
    return _frame(meta, features, outputs)


class _ChunkBuilder:
    """One chunk of iter_window, built from the fetches that make it up.

    The streamed path (columnar layout, features only, a known chunk size) decodes
    each fetch of rows of one all-numeric schema straight into the chunk's own
    preallocated float64 matrix, which the chunk frame then uses as is: one copy of
    each value, never fetched pieces and the assembled chunk side by side (that
    doubled the chunk while it was built: the streamed peak of sample_store_bench was
    2 chunks over its bound). Any other fetch (another schema, categorical values, the
    JSON layout, meta columns) goes through :meth:`SqlSampleStore._piece` and
    :func:`_assemble`, as do the rows already in the matrix when one arrives.
    """

    def __init__(self, store, names: list[str], capacity: int | None) -> None:
        self.store = store
        self.names = names
        self.rows = 0
        # Only the streamed drift check's read qualifies; read_window (one chunk of
        # unknown size) and reads with meta columns take the general path.
        self.direct = bool(capacity) and store.layout == LAYOUT_COLUMNAR and names == [
            "schema_id", "numbers", "others"
        ]  # fmt: skip
        self.capacity = capacity or 0
        self.matrix: np.ndarray | None = None
        self.numeric: list[str] = []
        self.schema_id: int | None = None
        self.filled = 0
        self.pieces: list[_Piece] = []

    def add(self, rows: list[tuple]) -> None:
        schema_id = self._direct_schema(rows)
        if schema_id is None:
            self._flush()
            self.pieces.append(self.store._piece(rows, self.names))
        else:
            if self.matrix is None:
                self.schema_id = schema_id
                self.numeric = [name for name, _ in self.store._schemas[schema_id]]
                self.matrix = np.empty((self.capacity, len(self.numeric)))
            values = np.frombuffer(b"".join([row[1] for row in rows]), dtype="<f8")
            stop = self.filled + len(rows)
            self.matrix[self.filled : stop] = values.reshape(len(rows), len(self.numeric))
            self.filled = stop
        self.rows += len(rows)

    def _direct_schema(self, rows: list[tuple]) -> int | None:
        """The schema id when ``rows`` can go straight into the matrix, else None."""
        if not self.direct or self.pieces:
            return None
        ids = {row[0] for row in rows}
        if len(ids) != 1:
            return None
        (schema_id,) = ids
        if schema_id not in self.store._schemas:
            self.store._load_schemas()
        fields = self.store._schemas[schema_id]
        if self.matrix is not None and schema_id != self.schema_id:
            return None
        if not fields or any(kind != NUMBER for _, kind in fields):
            return None
        return schema_id

    def _flush(self) -> None:
        """The matrix's rows as a piece, so that the general path can take over."""
        if self.matrix is not None and self.filled:
            used = self.matrix[: self.filled]
            features = {name: used[:, j] for j, name in enumerate(self.numeric)}
            self.pieces.append(_Piece(self.filled, features, None))
        self.matrix, self.filled = None, 0

    def frame(self) -> pd.DataFrame | None:
        if self.pieces:
            self._flush()
            return _assemble(self.pieces)
        if self.matrix is None:
            return None
        matrix = self.matrix if self.filled == self.capacity else self.matrix[: self.filled]
        self.matrix = None
        return _frame(None, pd.DataFrame(matrix, columns=self.numeric, copy=False), None)
