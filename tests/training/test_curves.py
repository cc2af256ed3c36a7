"""ROC and calibration tables for `dvc plots`."""

import numpy as np
import pytest
from sklearn.metrics import roc_auc_score

from driftgate.training.curves import (
    brier_score,
    calibration_table,
    expected_calibration_error,
    roc_points,
)


@pytest.fixture(scope="module")
def scored():
    rng = np.random.default_rng(7)
    probabilities = rng.uniform(0, 1, 20_000)
    labels = (rng.uniform(0, 1, 20_000) < probabilities).astype(int)  # calibrated by design
    return labels, probabilities


def test_roc_points_run_from_origin_to_corner_and_integrate_to_the_auc(scored):
    labels, probabilities = scored
    roc = roc_points(labels, probabilities)
    assert list(roc.columns) == ["fpr", "tpr", "threshold"]
    assert (roc.iloc[0].fpr, roc.iloc[0].tpr) == (0.0, 0.0)
    assert (roc.iloc[-1].fpr, roc.iloc[-1].tpr) == (1.0, 1.0)
    assert np.isfinite(roc["threshold"]).all() and roc["threshold"].max() <= 1.0
    area = np.trapezoid(roc["tpr"], roc["fpr"])
    assert area == pytest.approx(roc_auc_score(labels, probabilities), abs=1e-12)


def test_a_calibrated_model_has_a_small_calibration_error_and_a_skewed_one_a_large(scored):
    labels, probabilities = scored
    table = calibration_table(labels, probabilities, bins=10)
    assert list(table.columns) == ["bin", "mean_predicted", "observed_rate", "rows"]
    assert table["rows"].sum() == len(labels)
    assert table["bin"].tolist() == pytest.approx([0.05 + 0.1 * i for i in range(10)])
    assert expected_calibration_error(table) < 0.02
    overconfident = calibration_table(labels, probabilities**3, bins=10)
    assert expected_calibration_error(overconfident) > 0.15


def test_edge_probabilities_fall_in_the_outer_bins_and_empty_bins_are_left_out():
    table = calibration_table([0, 1, 1], [0.0, 1.0, 1.0], bins=4)
    assert table["bin"].tolist() == [0.125, 0.875]
    assert table["rows"].tolist() == [1, 2]
    assert table["observed_rate"].tolist() == [0.0, 1.0]
    assert expected_calibration_error(table) == 0.0


def test_brier_score_of_certain_right_and_wrong_answers():
    assert brier_score([0, 1], [0.0, 1.0]) == 0.0
    assert brier_score([0, 1], [1.0, 0.0]) == 1.0


@pytest.mark.parametrize(
    ("labels", "probabilities", "message"),
    [
        ([0, 1], [0.5], "2 labels but 1 predictions"),
        ([0, 1], [0.5, np.nan], "NaN/Inf"),
    ],
)
def test_bad_predictions_are_refused(labels, probabilities, message):
    for function in (roc_points, calibration_table, brier_score):
        with pytest.raises(ValueError, match=message):
            function(labels, probabilities)


def test_bins_must_be_positive():
    with pytest.raises(ValueError, match="bins must be at least 1"):
        calibration_table([0, 1], [0.2, 0.8], bins=0)
