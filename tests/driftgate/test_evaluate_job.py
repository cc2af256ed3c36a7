"""The evaluate job scores the registered artifact (pyfunc) on the held-out splits."""

import json

import numpy as np
import pandas as pd
import pytest

from driftgate.jobs.evaluate import evaluate_candidate, write_evaluation


@pytest.fixture(scope="module")
def evaluation(trained_model):
    return evaluate_candidate(
        trained_model.config, trained_model.outcome.registered.model_uri, curve_split="test"
    )


def test_registered_model_scores_what_training_measured_in_memory(trained_model, evaluation):
    for prefix in ("val", "test"):
        for name in ("accuracy", "roc_auc", "log_loss"):
            assert evaluation.metrics[prefix][name] == pytest.approx(
                trained_model.metrics[f"{prefix}_{name}"], abs=1e-6
            ), f"{prefix}_{name}"
        assert evaluation.metrics[prefix]["rows"] == 1500
        assert 0 < evaluation.metrics[prefix]["brier"] < 0.25  # better than always 0.5
        assert 0 <= evaluation.metrics[prefix]["expected_calibration_error"] < 0.2


def test_curves_describe_the_chosen_split(trained_model, evaluation):
    area = np.trapezoid(evaluation.roc["tpr"], evaluation.roc["fpr"])
    assert area == pytest.approx(evaluation.metrics["test"]["roc_auc"], abs=1e-9)
    assert evaluation.calibration["rows"].sum() == len(trained_model.data.splits.test)


def test_files_are_what_dvc_metrics_and_plots_read(evaluation, tmp_path):
    files = write_evaluation(evaluation, tmp_path / "metrics" / "evaluate.json", tmp_path / "p")
    assert json.loads(files["metrics"].read_text()) == evaluation.metrics
    roc = pd.read_csv(files["roc"])
    assert list(roc.columns) == ["fpr", "tpr", "threshold"] and np.isfinite(roc.values).all()
    calibration = pd.read_csv(files["calibration"])
    assert list(calibration.columns) == ["bin", "mean_predicted", "observed_rate", "rows"]


def test_an_unknown_split_is_refused_before_any_work(trained_model):
    with pytest.raises(ValueError, match="split must be one of val, test"):
        evaluate_candidate(trained_model.config, "models:/x/1", curve_split="production")
