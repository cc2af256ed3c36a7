"""Output helpers shared by the checks that compare two models' outputs."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np


def as_probabilities(output) -> np.ndarray:
    return np.asarray(output, dtype=np.float64).ravel()


def torch_outputs(model: Callable, rows: np.ndarray) -> np.ndarray:
    # torch is imported when a check runs, not when gates.yaml is validated against
    # this registry: the service and the drift check load gates.yaml without torch work.
    import torch

    with torch.no_grad():
        return as_probabilities(model(torch.as_tensor(rows, dtype=torch.float32)))


def largest_abs_diff(a: np.ndarray, b: np.ndarray) -> float:
    if a.shape != b.shape:
        return math.inf
    both_nan = np.isnan(a) & np.isnan(b)
    diff = np.abs(a - b)
    diff[both_nan] = 0.0
    return float(np.nan_to_num(diff, nan=math.inf).max(initial=0.0))
