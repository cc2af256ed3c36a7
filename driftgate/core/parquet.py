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
    """
    import pyarrow.parquet as pq

    table = pq.read_table(str(path), use_threads=False, pre_buffer=False)
    return table.to_pandas(use_threads=False)
