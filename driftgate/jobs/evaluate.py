"""The evaluate job (DVC stage ``evaluate``): score a registered version on held-out data.

The registered model is loaded through pyfunc, as the service and the gate load it,
so the figures describe the artifact in the registry rather than the in-memory model
training had. Writes a metrics JSON (``dvc metrics``) and ROC and calibration tables
as CSV (``dvc plots``).
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from driftgate import registry
from driftgate.config import ProjectConfig
from driftgate.jobs.data import prepare_data
from driftgate.training.curves import (
    brier_score,
    calibration_table,
    expected_calibration_error,
    roc_points,
)
from driftgate.training.evaluate import classification_metrics, task_metrics
from driftgate.training.inputs import encode_target, learn_classes, model_inputs

log = logging.getLogger(__name__)

HELD_OUT = {"val": "validation", "test": "test"}  # metric prefix -> split


@dataclass(frozen=True)
class Evaluation:
    model_uri: str
    curve_split: str  # the split the ROC and calibration tables describe
    metrics: dict[str, dict[str, float]]  # split prefix -> metric -> value
    roc: pd.DataFrame
    calibration: pd.DataFrame


def evaluate_candidate(
    config: ProjectConfig, model_uri: str, curve_split: str = "test", bins: int = 10
) -> Evaluation:
    """Score ``model_uri`` on the validation and test splits; curves on ``curve_split``."""
    if curve_split not in HELD_OUT:
        raise ValueError(f"split must be one of {', '.join(HELD_OUT)}, got '{curve_split}'")
    # The contract was checked when the data was prepared and again when training read it.
    data = prepare_data(config, validate_contract=False)
    model = registry.load_pyfunc(config.tracking, model_uri)
    if config.model.task != "binary":
        return _evaluate_other_task(config, data, model, model_uri, curve_split)
    metrics, curves = {}, {}
    for prefix, split in HELD_OUT.items():
        frame = getattr(data.splits, split)
        labels = frame[data.target].to_numpy()
        probabilities = np.asarray(
            model.predict(model_inputs(frame, data.specs)), dtype=np.float64
        ).ravel()
        table = calibration_table(labels, probabilities, bins)
        metrics[prefix] = {
            **classification_metrics(labels, probabilities, config.serving.decision_threshold),
            "brier": brier_score(labels, probabilities),
            "expected_calibration_error": expected_calibration_error(table),
            "rows": len(frame),
        }
        curves[prefix] = (roc_points(labels, probabilities), table)
    roc, calibration = curves[curve_split]
    log.info("evaluated %s: %s", model_uri, metrics)
    return Evaluation(model_uri, curve_split, metrics, roc, calibration)


def _evaluate_other_task(config, data, model, model_uri: str, curve_split: str) -> Evaluation:
    """Multiclass and regression (model.task): the task's metrics; ROC and calibration
    describe P(class 1) of a binary model only, so their tables are empty."""
    task, specs = config.model.task, data.specs
    classes = learn_classes(data.splits.train[data.target]) if task == "multiclass" else ()
    metrics = {}
    for prefix, split in HELD_OUT.items():
        frame = getattr(data.splits, split)
        outputs = np.asarray(model.predict(model_inputs(frame, specs)), dtype=np.float64)
        target = encode_target(task, frame[data.target], classes, split)
        metrics[prefix] = {
            **task_metrics(task, target, outputs, config.serving.decision_threshold),
            "rows": len(frame),
        }
    log.info("evaluated %s: %s", model_uri, metrics)
    return Evaluation(model_uri, curve_split, metrics, pd.DataFrame(), pd.DataFrame())


def write_evaluation(
    evaluation: Evaluation, metrics_file: Path, plots_dir: Path
) -> dict[str, Path]:
    """``metrics_file`` (JSON) and ``roc.csv`` / ``calibration.csv`` in ``plots_dir``."""
    files = {
        "metrics": metrics_file,
        "roc": plots_dir / "roc.csv",
        "calibration": plots_dir / "calibration.csv",
    }
    metrics_file.parent.mkdir(parents=True, exist_ok=True)
    plots_dir.mkdir(parents=True, exist_ok=True)
    metrics_file.write_text(json.dumps(evaluation.metrics, indent=2) + "\n")
    evaluation.roc.to_csv(files["roc"], index=False)
    evaluation.calibration.to_csv(files["calibration"], index=False)
    return files
