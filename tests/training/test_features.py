"""The feature seam: specs and the one frame-to-matrix encoding."""

import numpy as np
import pandas as pd
import pytest

from driftgate.training.features import FeatureSpec, category_key, encode_features


def test_numeric_and_categorical_encode_to_one_float32_matrix():
    specs = [FeatureSpec("x"), FeatureSpec("colour", "categorical", ("red", "blue"))]
    frame = pd.DataFrame({"x": [1.5, None, 3.0, 4.0], "colour": ["blue", "red", None, "green"]})
    matrix = encode_features(frame, specs)
    assert matrix.dtype == np.float32
    assert matrix[:, 0][[0, 2, 3]].tolist() == [1.5, 3.0, 4.0]
    assert np.isnan(matrix[1, 0])
    # blue -> 1, red -> 0, missing -> NaN, unseen "green" -> the unseen bucket (2)
    assert matrix[[0, 1, 3], 1].tolist() == [1.0, 0.0, 2.0]
    assert np.isnan(matrix[2, 1])


def test_pandas_category_dtype_and_integer_codes_meet_their_strings():
    spec = FeatureSpec("grade", "categorical", ("1", "2", "3"))
    as_category = pd.DataFrame({"grade": pd.Categorical(["3", "1"])})
    as_ints = pd.DataFrame({"grade": [3, 1]})
    as_floats = pd.DataFrame({"grade": [3.0, 1.0]})
    expected = [[2.0], [0.0]]
    for frame in (as_category, as_ints, as_floats):
        assert encode_features(frame, [spec]).tolist() == expected
    assert category_key(True) == "true"


def test_errors_name_the_column():
    with pytest.raises(KeyError, match="missing feature column"):
        encode_features(pd.DataFrame({"a": [1]}), [FeatureSpec("b")])
    with pytest.raises(ValueError, match="column 'a' is not numeric"):
        encode_features(pd.DataFrame({"a": ["x"]}), [FeatureSpec("a")])
    with pytest.raises(ValueError, match="numeric but lists categories"):
        FeatureSpec("a", "numeric", ("x",))


def test_spec_round_trips_through_a_dict():
    spec = FeatureSpec("c", "categorical", ("a", "b"))
    assert FeatureSpec.from_dict(spec.to_dict()) == spec
    assert spec.unseen_code == 2
