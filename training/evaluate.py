"""Metrics per task with one naming scheme: ``<split>_<metric>``.

The same names are logged on every training run, so MLflow's compare view lines up
versions metric by metric, and the promotion gate reads them by name. Which metrics a
task has is :data:`TASK_METRICS`; :func:`task_metrics` computes them from the model's
output (binary: P(class 1); multiclass: one probability per class; regression: the
predicted value).
"""

from __future__ import annotations

from typing import Literal, get_args

import numpy as np

# The one list of metric names: the gate config's `metric:` keys are this type.
MetricName = Literal["accuracy", "roc_auc", "log_loss", "macro_f1", "rmse", "mae", "r2"]
METRIC_NAMES: tuple[str, ...] = get_args(MetricName)
# The metrics each task is scored with, in the order they are reported.
TASK_METRICS: dict[str, tuple[str, ...]] = {
    "binary": ("accuracy", "roc_auc", "log_loss"),
    "multiclass": ("accuracy", "macro_f1", "log_loss"),
    "regression": ("rmse", "mae", "r2"),
}
# The metric a task is summarised by (descriptions, the overfitting check's default).
HEADLINE_METRIC = {"binary": "roc_auc", "multiclass": "accuracy", "regression": "r2"}
# P(class 1) at or above this is class 1: the default of `serving.decision_threshold`.
# Everything that turns P(class 1) into a class (accuracy at training, in the gate and
# in production, the degenerate-output check) is given the configured threshold, so a
# service answering at 0.3 is scored at 0.3.
DECISION_THRESHOLD = 0.5


def classification_metrics(
    y_true: np.ndarray, probabilities: np.ndarray, decision_threshold: float = DECISION_THRESHOLD
) -> dict[str, float]:
    """Accuracy (class 1 at ``decision_threshold``), ROC AUC and log loss of P(class 1)."""
    # sklearn costs seconds to import; the names and the threshold above are read by
    # configuration models (gates.yaml, serving) that must load without it.
    from sklearn.metrics import accuracy_score, log_loss, roc_auc_score

    y_true = np.asarray(y_true).astype(int)
    probabilities = np.asarray(probabilities, dtype=np.float64)
    if len(y_true) != len(probabilities):
        raise ValueError(f"{len(y_true)} labels but {len(probabilities)} predictions")
    if not np.isfinite(probabilities).all():
        raise ValueError("predictions contain NaN/Inf; the model is broken")
    predictions = (probabilities >= decision_threshold).astype(int)
    both_classes = len(np.unique(y_true)) == 2
    return {
        "accuracy": float(accuracy_score(y_true, predictions)),
        # AUC is undefined on a single-class split; NaN says so instead of crashing.
        "roc_auc": float(roc_auc_score(y_true, probabilities)) if both_classes else float("nan"),
        "log_loss": float(log_loss(y_true, np.clip(probabilities, 1e-7, 1 - 1e-7), labels=[0, 1])),
    }


def multiclass_metrics(y_index: np.ndarray, probabilities: np.ndarray) -> dict[str, float]:
    """Accuracy (of the most probable class), macro F1 and log loss.

    ``y_index`` is the true class's index into the model's classes; ``probabilities``
    has one column per class.
    """
    from sklearn.metrics import accuracy_score, f1_score, log_loss

    y_index = np.asarray(y_index).astype(int)
    probabilities = np.asarray(probabilities, dtype=np.float64)
    if probabilities.ndim != 2 or len(y_index) != len(probabilities):
        raise ValueError(f"{len(y_index)} labels but predictions of shape {probabilities.shape}")
    if not np.isfinite(probabilities).all():
        raise ValueError("predictions contain NaN/Inf; the model is broken")
    labels = list(range(probabilities.shape[1]))
    predicted = probabilities.argmax(axis=1)
    clipped = np.clip(probabilities, 1e-7, 1.0)
    return {
        "accuracy": float(accuracy_score(y_index, predicted)),
        "macro_f1": float(f1_score(y_index, predicted, labels=labels, average="macro")),
        "log_loss": float(
            log_loss(y_index, clipped / clipped.sum(axis=1, keepdims=True), labels=labels)
        ),
    }


def regression_metrics(y_true: np.ndarray, predicted: np.ndarray) -> dict[str, float]:
    """Root mean squared error, mean absolute error and R² of predicted values."""
    y_true = np.asarray(y_true, dtype=np.float64)
    predicted = np.asarray(predicted, dtype=np.float64).ravel()
    if len(y_true) != len(predicted):
        raise ValueError(f"{len(y_true)} targets but {len(predicted)} predictions")
    if not np.isfinite(predicted).all():
        raise ValueError("predictions contain NaN/Inf; the model is broken")
    error = predicted - y_true
    spread = float(((y_true - y_true.mean()) ** 2).sum())
    return {
        "rmse": float(np.sqrt((error**2).mean())),
        "mae": float(np.abs(error).mean()),
        # R² is undefined on a constant target; NaN says so.
        "r2": 1.0 - float((error**2).sum()) / spread if spread > 0 else float("nan"),
    }


def task_metrics(
    task: str,
    y_true: np.ndarray,
    outputs: np.ndarray,
    decision_threshold: float = DECISION_THRESHOLD,
) -> dict[str, float]:
    """The task's metrics (:data:`TASK_METRICS`) of the model's ``outputs``.

    ``y_true``: 0/1 for binary, the class index for multiclass, the value for regression.
    ``decision_threshold``: binary only (the service's ``serving.decision_threshold``).
    """
    if task == "multiclass":
        return multiclass_metrics(y_true, outputs)
    if task == "regression":
        return regression_metrics(y_true, outputs)
    return classification_metrics(
        y_true, np.asarray(outputs, dtype=np.float64).ravel(), decision_threshold
    )


def prefixed(split: str, metrics: dict[str, float]) -> dict[str, float]:
    return {f"{split}_{name}": value for name, value in metrics.items()}
