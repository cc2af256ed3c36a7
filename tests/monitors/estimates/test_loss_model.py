"""DLE's loss model is stored as plain numbers and evaluated in numpy: it must predict
exactly what scikit-learn's fitted trees predict, survive JSON, and refuse a tree that
could send a walk outside itself."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from sklearn.ensemble import HistGradientBoostingRegressor
from threadpoolctl import threadpool_limits

from driftgate.monitors.estimates import loss_model
from driftgate.monitors.estimates.calibration import OutputsError
from driftgate.monitors.estimates.loss_model import LossModel


@pytest.fixture(scope="module")
def frame_and_loss():
    rng = np.random.default_rng(3)
    rows = 2000
    frame = pd.DataFrame(
        {
            "prediction": rng.normal(size=rows),
            "x": rng.normal(size=rows),
            "city": rng.choice(["a", "b", "c"], rows),
        }
    )
    frame.loc[rng.random(rows) < 0.05, "x"] = np.nan  # missing values take a side
    loss = (1 + np.nan_to_num(frame["x"].abs())) * rng.exponential(size=rows)
    loss += np.where(frame["city"] == "c", 2.0, 0.0)
    return frame, loss


def test_numpy_trees_predict_what_scikit_learn_predicts(frame_and_loss):
    frame, loss = frame_and_loss
    model = LossModel.fit(frame, ["prediction", "x", "city"], loss)
    reference = loss_model._regressor()
    with threadpool_limits(limits=1, user_api="openmp"):  # shared cores: as the model fits
        reference.fit(model.matrix(frame), loss)
    assert isinstance(reference, HistGradientBoostingRegressor)
    expected = np.clip(reference.predict(model.matrix(frame)), 0, None)
    np.testing.assert_allclose(model.predict(frame), expected, rtol=1e-9, atol=1e-9)
    # The levels matter: city c costs 2 more on average.
    predicted = model.predict(frame)
    assert predicted[frame["city"] == "c"].mean() > predicted[frame["city"] != "c"].mean() + 1.5


def test_the_model_round_trips_through_json_and_unseen_levels_are_missing(frame_and_loss):
    frame, loss = frame_and_loss
    model = LossModel.fit(frame, ["prediction", "x", "city"], loss)
    again = LossModel.from_json(json.loads(json.dumps(model.to_json(), allow_nan=False)))
    np.testing.assert_array_equal(again.predict(frame), model.predict(frame))
    unseen = frame.head(5).assign(city="never seen")
    assert np.isfinite(again.predict(unseen)).all()


def test_a_tree_whose_children_point_back_is_refused(frame_and_loss):
    frame, loss = frame_and_loss
    document = LossModel.fit(frame, ["prediction", "x", "city"], loss).to_json()
    tree = document["trees"][0]
    inner = tree["is_leaf"].index(False)
    tree["left"][inner] = inner  # a loop: the walk would never end
    with pytest.raises(OutputsError, match="children point outside the tree"):
        LossModel.from_json(document)
    document["method"] = "pickle"
    with pytest.raises(OutputsError, match="unknown loss model method 'pickle'"):
        LossModel.from_json(document)


def test_a_window_without_a_feature_the_model_reads_says_which(frame_and_loss):
    frame, loss = frame_and_loss
    model = LossModel.fit(frame, ["prediction", "x", "city"], loss)
    with pytest.raises(OutputsError, match="needs the column 'city'"):
        model.predict(frame.drop(columns="city"))
