"""Reading a Parquet file so that the process can still exit cleanly afterwards."""

from __future__ import annotations

from pathlib import Path

import pandas as pd


def read_parquet(path: str | Path) -> pd.DataFrame:
    """The file as ``pd.read_parquet`` gives it (pyarrow's pandas conversion, the
    pandas metadata honoured), opened by pyarrow from its path on one thread.

    Why not ``pd.read_parquet``: pandas opens the file and hands pyarrow a Python file
    object, which pyarrow reads on its thread pools; that pool, torn down when the
    interpreter exits, intermittently aborts the process (SIGABRT, "terminate called
    without an active exception"; apache/arrow#34314 and #50482). A CLI that had
    printed its message and chosen exit code 2 died with -6 instead, in CI. The files
    driftgate reads (labels, prepared splits, a profile's sample) are read once, so
    one thread costs little.

    Why ``ParquetFile`` and not ``pq.read_table``: for one file they read the same
    table, but ``read_table`` goes through ``pyarrow.dataset``, whose import was 0.16 s
    of a fresh drift check that reads a single profile sample (issue 32).
    """
    import pyarrow.parquet as pq

    with pq.ParquetFile(str(path), pre_buffer=False) as file:
        table = file.read(use_threads=False)
    return table.to_pandas(use_threads=False)
