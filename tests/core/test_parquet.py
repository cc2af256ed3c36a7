"""``read_parquet`` gives what ``pd.read_parquet`` gives, without pandas' file object."""

import numpy as np
import pandas as pd

from driftgate.core.parquet import read_parquet


def test_reads_what_pandas_reads(tmp_path):
    frame = pd.DataFrame(
        {
            "x": [1.5, np.nan, 3.0],
            "n": pd.array([1, None, 3], dtype="Int64"),
            "city": pd.Categorical(["a", "b", "a"]),
            "at": pd.to_datetime(["2024-01-01", "2024-01-02", None], utc=True),
            "cells": [[1], [2, 3], []],
            "flag": [True, False, True],
        },
        index=pd.Index([10, 11, 12], name="row"),
    )
    path = tmp_path / "frame.parquet"
    frame.to_parquet(path)
    ours = read_parquet(path)
    pd.testing.assert_frame_equal(ours, pd.read_parquet(path))
    assert ours.index.name == "row" and isinstance(ours["city"].dtype, pd.CategoricalDtype)


def test_reading_one_file_does_not_import_pyarrow_dataset(tmp_path):
    # pq.read_table goes through pyarrow.dataset, 0.16 s of a fresh drift check that
    # reads one profile sample (issue 32); ParquetFile reads the same table without it.
    import subprocess
    import sys

    path = tmp_path / "frame.parquet"
    pd.DataFrame({"x": [1.0, 2.0]}).to_parquet(path)
    code = (
        "import sys\nfrom driftgate.core.parquet import read_parquet\n"
        f"assert read_parquet({str(path)!r})['x'].tolist() == [1.0, 2.0]\n"
        "print('pyarrow.dataset' in sys.modules, 'pyarrow.parquet' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["False", "True"]
