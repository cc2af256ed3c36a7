"""ROC and calibration curves of predicted P(class 1), as tables a plot tool reads.

``driftgate evaluate`` writes them as CSV for ``dvc plots``; each function returns a
plain frame with the column names the plot definitions in dvc.yaml use.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from sklearn.metrics import brier_score_loss, roc_curve


def _checked(y_true, probabilities) -> tuple[np.ndarray, np.ndarray]:
    y_true = np.asarray(y_true).astype(int)
    probabilities = np.asarray(probabilities, dtype=np.float64).ravel()
    if len(y_true) != len(probabilities):
        raise ValueError(f"{len(y_true)} labels but {len(probabilities)} predictions")
    if not np.isfinite(probabilities).all():
        raise ValueError("predictions contain NaN/Inf; the model is broken")
    return y_true, probabilities


def roc_points(y_true, probabilities) -> pd.DataFrame:
    """False and true positive rates at each threshold (columns fpr, tpr, threshold).

    The first row's threshold is infinite in scikit-learn (nothing predicted positive);
    it is written as 1.0 so the CSV holds numbers only.
    """
    y_true, probabilities = _checked(y_true, probabilities)
    fpr, tpr, thresholds = roc_curve(y_true, probabilities)
    thresholds = np.minimum(thresholds, 1.0)
    return pd.DataFrame({"fpr": fpr, "tpr": tpr, "threshold": thresholds})


def calibration_table(y_true, probabilities, bins: int = 10) -> pd.DataFrame:
    """Observed rate of class 1 per equal-width probability bin (empty bins left out).

    Columns: bin (its centre), mean_predicted, observed_rate, rows.
    """
    if bins < 1:
        raise ValueError(f"bins must be at least 1, got {bins}")
    y_true, probabilities = _checked(y_true, probabilities)
    edges = np.linspace(0.0, 1.0, bins + 1)
    # right-closed last bin: a probability of exactly 1.0 belongs to the top bin
    index = np.clip(np.digitize(probabilities, edges[1:-1], right=False), 0, bins - 1)
    rows = []
    for b in range(bins):
        chosen = index == b
        if chosen.any():
            rows.append(
                {
                    "bin": round((edges[b] + edges[b + 1]) / 2, 10),
                    "mean_predicted": float(probabilities[chosen].mean()),
                    "observed_rate": float(y_true[chosen].mean()),
                    "rows": int(chosen.sum()),
                }
            )
    return pd.DataFrame(rows, columns=["bin", "mean_predicted", "observed_rate", "rows"])


def expected_calibration_error(table: pd.DataFrame) -> float:
    """Row-weighted mean |observed - predicted| over the calibration table's bins."""
    weights = table["rows"] / table["rows"].sum()
    return float((weights * (table["observed_rate"] - table["mean_predicted"]).abs()).sum())


def brier_score(y_true, probabilities) -> float:
    y_true, probabilities = _checked(y_true, probabilities)
    return float(brier_score_loss(y_true, probabilities))
