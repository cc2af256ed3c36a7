"""Classification metrics with one naming scheme: ``<split>_<metric>``.

The same names are logged on every training run, so MLflow's compare view lines up
versions metric by metric, and the promotion gate reads them by name.
"""

from __future__ import annotations

from typing import Literal, get_args

import numpy as np

# The one list of metric names: the gate config's `metric:` keys are this type.
MetricName = Literal["accuracy", "roc_auc", "log_loss"]
METRIC_NAMES: tuple[str, ...] = get_args(MetricName)
# P(class 1) at or above this is class 1: for accuracy here, the degenerate-output
# gate check and the service's default `serving.decision_threshold`.
DECISION_THRESHOLD = 0.5


def classification_metrics(y_true: np.ndarray, probabilities: np.ndarray) -> dict[str, float]:
    """Accuracy (at DECISION_THRESHOLD), ROC AUC and log loss of predicted P(class 1)."""
    # sklearn costs seconds to import; the names and the threshold above are read by
    # configuration models (gates.yaml, serving) that must load without it.
    from sklearn.metrics import accuracy_score, log_loss, roc_auc_score

    y_true = np.asarray(y_true).astype(int)
    probabilities = np.asarray(probabilities, dtype=np.float64)
    if len(y_true) != len(probabilities):
        raise ValueError(f"{len(y_true)} labels but {len(probabilities)} predictions")
    if not np.isfinite(probabilities).all():
        raise ValueError("predictions contain NaN/Inf; the model is broken")
    predictions = (probabilities >= DECISION_THRESHOLD).astype(int)
    both_classes = len(np.unique(y_true)) == 2
    return {
        "accuracy": float(accuracy_score(y_true, predictions)),
        # AUC is undefined on a single-class split; NaN says so instead of crashing.
        "roc_auc": float(roc_auc_score(y_true, probabilities)) if both_classes else float("nan"),
        "log_loss": float(log_loss(y_true, np.clip(probabilities, 1e-7, 1 - 1e-7), labels=[0, 1])),
    }


def prefixed(split: str, metrics: dict[str, float]) -> dict[str, float]:
    return {f"{split}_{name}": value for name, value in metrics.items()}
