"""A window summarised in parts (row slices x feature groups) equals the one-pass check."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from driftgate.monitors import check_drift, check_drift_counts
from driftgate.monitors.partitions import (
    feature_groups,
    row_slices,
    summarise_in_process,
    summarise_part,
    summarise_parts,
)
from driftgate.monitors.profile import ReferenceProfile
from driftgate.monitors.window import MissingColumnError, merge_windows, summarise_window

TESTS = ["ks", "kl", "psi", "js", "wasserstein", "chi2", "missing_share", "mean_shift"]


@pytest.fixture
def frames(rng):
    n = 5_000
    reference = pd.DataFrame(
        {
            "a": rng.normal(0, 1, n),
            "b": rng.exponential(2, n),
            "c": rng.choice(["x", "y", "z"], n, p=[0.5, 0.3, 0.2]),
            "d": rng.integers(0, 5, n).astype(float),
            "e": rng.normal(5, 2, n),
        }
    )
    current = pd.DataFrame(
        {
            "a": rng.normal(0.3, 1.1, 7_777),
            "b": rng.exponential(2.5, 7_777),
            "c": rng.choice(["x", "y", "w"], 7_777),
            "d": rng.integers(0, 6, 7_777).astype(float),
            "e": rng.normal(5, 2, 7_777),
        }
    )
    current.loc[::13, "a"] = np.nan
    current.loc[5, "b"] = np.inf
    current.loc[::17, "c"] = None
    return reference, current


@pytest.fixture
def profile(frames):
    schema = {"a": "numeric", "b": "numeric", "c": "categorical", "d": "numeric", "e": "numeric"}
    # A small breakpoint budget, so the gap sums (floating point) are exercised.
    return ReferenceProfile.fit(frames[0], schema, sample_rows=0, ks_max_breakpoints=64)


def as_dict(report) -> dict:
    return report.to_dict()


def test_feature_groups_cut_contiguously_and_cover_every_feature():
    names = ["a", "b", "c", "d", "e"]
    assert feature_groups(names, 2) == [["a", "b", "c"], ["d", "e"]]
    assert feature_groups(names, 9) == [[n] for n in names]
    assert feature_groups(names, 1) == [names]
    with pytest.raises(ValueError, match="groups must be at least 1"):
        feature_groups(names, 0)


def test_row_slices_keep_order_and_every_row(frames):
    current = frames[1]
    slices = row_slices(current, 1000)
    assert [len(s) for s in slices] == [1000] * 7 + [777]
    pd.testing.assert_frame_equal(pd.concat(slices), current)
    assert row_slices(current.iloc[:0], 10)[0].empty
    with pytest.raises(ValueError, match="at least 1"):
        row_slices(current, 0)


@pytest.mark.parametrize(("rows", "groups"), [(1000, 1), (1000, 3), (7_777, 5), (333, 2)])
def test_parts_equal_the_same_slices_read_as_chunks_bit_for_bit(profile, frames, rows, groups):
    current = frames[1]
    slices = row_slices(current, rows)
    in_parts = summarise_parts(profile, slices, feature_groups(list(profile.features), groups))
    as_chunks = summarise_window(profile, iter(slices))
    assert in_parts.rows == as_chunks.rows == len(current)
    assert as_dict(check_drift_counts(profile, in_parts, TESTS)) == as_dict(
        check_drift_counts(profile, as_chunks, TESTS)
    )


def test_parts_agree_with_one_pass_up_to_float_rounding(profile, frames):
    current = frames[1]
    whole = check_drift(profile, current, TESTS)
    parts = check_drift_counts(
        profile,
        summarise_parts(profile, row_slices(current, 500), [["a", "b"], ["c", "d", "e"]]),
        TESTS,
    )
    for one, other in zip(whole.results, parts.results, strict=True):
        assert (one.feature, one.test, one.drifted) == (other.feature, other.test, other.drifted)
        assert other.value == pytest.approx(one.value, rel=1e-9, abs=1e-12)


def test_parquet_parts_equal_frame_parts(profile, frames, tmp_path):
    current = frames[1]
    slices = row_slices(current, 2000)
    paths = []
    for index, piece in enumerate(slices):
        path = tmp_path / f"part-{index:03d}.parquet"
        # Small row groups: each part is read one row group at a time.
        piece.to_parquet(path, row_group_size=500)
        paths.append(path)
    groups = feature_groups(list(profile.features), 2)
    from_files = summarise_parts(profile, paths, groups)
    from_frames = summarise_parts(profile, [iter_part for iter_part in slices], groups)
    assert from_files.rows == from_frames.rows
    for name in profile.features:
        counts = from_files.features[name]
        other = from_frames.features[name]
        assert counts.missing_count == other.missing_count
    # Counts are exact; row-group chunking only reorders float additions.
    files_report = check_drift_counts(profile, from_files, TESTS)
    frames_report = check_drift_counts(profile, from_frames, TESTS)
    for one, other in zip(files_report.results, frames_report.results, strict=True):
        assert other.value == pytest.approx(one.value, rel=1e-9, abs=1e-12)
        assert one.drifted == other.drifted


def test_a_part_missing_a_column_is_named_with_its_file(profile, frames, tmp_path):
    path = tmp_path / "bad.parquet"
    frames[1].drop(columns="e").to_parquet(path)
    with pytest.raises(
        MissingColumnError, match=r"bad\.parquet lacks profiled column\(s\) \['e'\]"
    ):
        summarise_part(profile, path, ["d", "e"])
    with pytest.raises(ValueError, match="cannot read window part"):
        summarise_part(profile, tmp_path / "absent.parquet", ["a"])


def test_merge_rejects_groups_that_overlap_or_disagree(profile, frames):
    current = frames[1]
    first, second = row_slices(current, 4000)
    ab = summarise_window(profile, first, ["a", "b"])
    bc = summarise_window(profile, first, ["b", "c"])
    with pytest.raises(ValueError, match="overlap"):
        merge_windows(profile, [[ab, bc]])
    other_rows = summarise_window(profile, second, ["c"])
    with pytest.raises(ValueError, match="disagree on its rows"):
        merge_windows(profile, [[ab, other_rows]])
    with pytest.raises(ValueError, match="covers"):
        merge_windows(profile, [[ab], [summarise_window(profile, second, ["a"])]])


def test_a_mapper_that_loses_cells_is_an_error(profile, frames):
    def lossy(profile, cells):
        return summarise_in_process(profile, cells)[:-1]

    with pytest.raises(ValueError, match="returned 1 windows for 2 cells"):
        summarise_parts(profile, row_slices(frames[1], 4000), mapper=lossy)


def test_check_drift_counts_needs_the_features_it_tests(profile, frames):
    from driftgate.monitors import DriftConfigError

    partial = summarise_window(profile, frames[1], ["a"])
    with pytest.raises(DriftConfigError, match="not summarised for features"):
        check_drift_counts(profile, partial, ["ks"])
    report = check_drift_counts(profile, partial, {"a": ["ks"], "b": [], "c": [], "d": [], "e": []})
    assert [(r.feature, r.test) for r in report.results] == [("a", "ks")]
