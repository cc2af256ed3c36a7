"""ReferenceProfile: fitting, schema inference, save/load without pickle."""

from __future__ import annotations

import json
import zipfile

import numpy as np
import pandas as pd
import pytest

from driftgate.monitors.profile import (
    ProfileError,
    ReferenceProfile,
    category_counts,
    infer_feature_type,
)


@pytest.fixture
def reference(rng) -> pd.DataFrame:
    n = 2000
    frame = pd.DataFrame(
        {
            "amount": rng.lognormal(size=n),
            "count": rng.poisson(3, n),
            "city": rng.choice(["paris", "oslo", "rome"], n),
            "flag": rng.random(n) < 0.3,
        }
    )
    frame.loc[::10, "amount"] = np.nan
    frame.loc[::25, "city"] = None
    return frame


def test_schema_is_inferred_from_dtypes(reference):
    profile = ReferenceProfile.fit(reference)
    assert profile.schema == {
        "amount": "numeric",
        "count": "numeric",
        "city": "categorical",
        "flag": "categorical",
    }
    assert infer_feature_type(pd.Series(["1"])) == "categorical"


def test_fitted_statistics(reference):
    profile = ReferenceProfile.fit(reference, {"amount": "numeric", "city": "categorical"})
    amount = profile.features["amount"]
    finite = reference["amount"].dropna().to_numpy()
    assert amount.missing_count == 200 and amount.missing_share == pytest.approx(0.1)
    assert amount.mean == pytest.approx(finite.mean()) and amount.std == pytest.approx(finite.std())
    assert amount.bin_counts.sum() == 1800 and amount.bin_edges.size == 9
    assert amount.ks_exact and amount.breakpoints.size == np.unique(finite).size
    city = profile.features["city"]
    assert city.missing_count == 80
    assert sum(city.category_counts.values()) == 1920


def test_unknown_type_and_absent_column_are_named(reference):
    with pytest.raises(ProfileError, match=r"'amount'.*'text'"):
        ReferenceProfile.fit(reference, {"amount": "text"})
    with pytest.raises(ProfileError, match="nope"):
        ReferenceProfile.fit(reference, {"nope": "numeric"})


def test_save_load_round_trip_is_json_npz_parquet(reference, tmp_path):
    profile = ReferenceProfile.fit(reference, sample_rows=100, metadata={"data": "v1"})
    folder = profile.save(tmp_path / "profile")
    assert sorted(p.name for p in folder.iterdir()) == [
        "breakpoints.npz",
        "profile.json",
        "reference_sample.parquet",
    ]
    document = json.loads((folder / "profile.json").read_text())
    assert document["format_version"] == 1
    assert document["features"]["city"]["category_counts"]["paris"] > 0
    with zipfile.ZipFile(folder / "breakpoints.npz") as npz:
        assert all(name.endswith(".npy") for name in npz.namelist())
    with np.load(folder / "breakpoints.npz", allow_pickle=False) as arrays:
        assert all(arrays[key].dtype != object for key in arrays.files)

    loaded = ReferenceProfile.load(folder)
    assert loaded.schema == profile.schema and loaded.metadata == {"data": "v1"}
    assert len(loaded.reference_sample) == 100
    for name, feature in profile.features.items():
        other = loaded.features[name]
        if feature.type == "numeric":
            np.testing.assert_array_equal(other.breakpoints, feature.breakpoints)
            np.testing.assert_array_equal(other.ties, feature.ties)
            np.testing.assert_array_equal(other.bin_edges, feature.bin_edges)
            assert (other.mean, other.std, other.missing_count) == (
                feature.mean,
                feature.std,
                feature.missing_count,
            )
        else:
            assert other.category_counts == feature.category_counts


def test_bounded_breakpoints_round_trip(rng, tmp_path):
    frame = pd.DataFrame({"x": rng.normal(size=10_000)})
    profile = ReferenceProfile.fit(frame, ks_max_breakpoints=100, sample_rows=0)
    feature = profile.features["x"]
    assert not feature.ks_exact
    assert feature.breakpoints.size <= 102 and feature.ks_max_gap_share <= 1 / 100
    assert feature.ties.sum() + feature.gap_counts.sum() == 10_000
    loaded = ReferenceProfile.load(profile.save(tmp_path / "p")).features["x"]
    np.testing.assert_array_equal(loaded.gap_counts, feature.gap_counts)
    np.testing.assert_array_equal(loaded.gap_sums, feature.gap_sums)


def test_all_nan_and_constant_columns_fit(tmp_path):
    frame = pd.DataFrame({"empty": [np.nan] * 5, "constant": [3.0] * 5})
    profile = ReferenceProfile.fit(frame)
    assert profile.features["empty"].missing_share == 1.0
    assert profile.features["constant"].bin_edges.tolist() == [3.0]
    loaded = ReferenceProfile.load(profile.save(tmp_path / "p"))
    assert np.isnan(loaded.features["empty"].mean)


def test_load_rejects_unknown_versions(reference, tmp_path):
    folder = ReferenceProfile.fit(reference).save(tmp_path / "p")
    document = json.loads((folder / "profile.json").read_text())
    document["format_version"] = 99
    (folder / "profile.json").write_text(json.dumps(document))
    with pytest.raises(ProfileError, match="version 99"):
        ReferenceProfile.load(folder)
    with pytest.raises(ProfileError, match="not a reference profile"):
        ReferenceProfile.load(tmp_path / "nothing")


@pytest.mark.parametrize(
    "series",
    [
        pd.Series(["a", None, 3, np.nan, 3.0, "3", pd.NA, "a"], dtype=object),
        pd.Series(pd.Categorical(["x", None, "y", "x"], categories=["x", "y", "never"])),
        pd.Series([1.0, np.nan, 1.0, 2.0]),
        pd.Series([True, None, False], dtype="boolean"),
        pd.Series([], dtype=object),
    ],
)
def test_category_counts_count_missing_values_in_the_same_pass(series):
    # Missing values are read off value_counts(dropna=False): every kind of them (None,
    # NaN, pd.NA) counted as isna counts them, none of them a category.
    counts, missing = category_counts(series)
    assert missing == int(series.isna().sum())
    assert sum(counts.values()) == len(series) - missing
    assert all(count > 0 for count in counts.values())
    if series.dtype == object and len(series):
        assert counts == {"a": 2, "3": 3}
