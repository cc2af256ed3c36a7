"""Classification metrics with one naming scheme: ``<split>_<metric>``.

The same names are logged on every training run, so MLflow's compare view lines up
versions metric by metric, and the promotion gate reads them by name.
"""

from __future__ import annotations

import numpy as np
from sklearn.metrics import accuracy_score, log_loss, roc_auc_score

METRIC_NAMES = ("accuracy", "roc_auc", "log_loss")
DECISION_THRESHOLD = 0.5


def classification_metrics(y_true: np.ndarray, probabilities: np.ndarray) -> dict[str, float]:
    """Accuracy (at 0.5), ROC AUC and log loss of predicted P(class 1)."""
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
