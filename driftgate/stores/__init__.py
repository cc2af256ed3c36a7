"""Adapters for serving's durable state: the sample store and the control state.

- :class:`SqlSampleStore` (SQLite/PostgreSQL) and :class:`FileSampleSource`
  (Parquet/CSV) share ``read_window(start, end) -> DataFrame`` for the drift check;
- :class:`ControlStore` holds the pause switch and its audit log.
"""

from driftgate.stores._sql import StoreError
from driftgate.stores.control import ControlEvent, ControlStore, PauseState, SwitchChange
from driftgate.stores.samples import (
    FileSampleSource,
    Sample,
    SampleWindowReader,
    SqlSampleStore,
    open_sample_reader,
)

__all__ = [
    "ControlEvent",
    "ControlStore",
    "FileSampleSource",
    "PauseState",
    "Sample",
    "SampleWindowReader",
    "SqlSampleStore",
    "StoreError",
    "SwitchChange",
    "open_sample_reader",
]
