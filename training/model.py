"""A PyTorch tabular classifier that carries its own preprocessing.

The standardisation statistics (mean and standard deviation per feature) are computed
on the training split only and stored as buffers of the module, so they are saved with
the weights and applied identically wherever the model is loaded: in the gate, in the
service and in MLflow's pyfunc wrapper. Missing inputs (NaN) are imputed with the
training mean, inside the module for the same reason.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

# A feature whose training spread is below this is treated as constant: dividing by a
# near-zero std would turn tiny production noise into huge inputs.
MIN_STD = 1e-6


@dataclass(frozen=True)
class Standardization:
    """Per-feature mean and std, fitted on the training split only."""

    mean: np.ndarray
    std: np.ndarray

    @classmethod
    def fit(cls, train_features: np.ndarray) -> Standardization:
        values = np.asarray(train_features, dtype=np.float64)
        if values.ndim != 2 or values.shape[0] == 0:
            raise ValueError(f"expected a non-empty 2-D feature matrix, got shape {values.shape}")
        std = values.std(axis=0)
        std = np.where(std < MIN_STD, 1.0, std)
        return cls(mean=values.mean(axis=0), std=std)


class TabularClassifier(nn.Module):
    """MLP for binary classification; ``forward`` returns P(class 1), shape ``(batch,)``."""

    def __init__(
        self,
        n_features: int,
        hidden_sizes: Sequence[int] = (32, 16),
        dropout: float = 0.1,
        standardization: Standardization | None = None,
    ) -> None:
        super().__init__()
        self.n_features = n_features
        self.hidden_sizes = tuple(hidden_sizes)
        self.dropout = dropout
        self.register_buffer("feature_mean", torch.zeros(n_features))
        self.register_buffer("feature_std", torch.ones(n_features))
        if standardization is not None:
            self.set_standardization(standardization)
        layers: list[nn.Module] = []
        width = n_features
        for hidden in self.hidden_sizes:
            layers += [nn.Linear(width, hidden), nn.ReLU(), nn.Dropout(dropout)]
            width = hidden
        layers.append(nn.Linear(width, 1))
        self.network = nn.Sequential(*layers)

    def set_standardization(self, standardization: Standardization) -> None:
        if standardization.mean.shape != (self.n_features,):
            raise ValueError(
                f"standardization has {standardization.mean.shape[0]} features, "
                f"model expects {self.n_features}"
            )
        self.feature_mean.copy_(torch.as_tensor(standardization.mean, dtype=torch.float32))
        self.feature_std.copy_(torch.as_tensor(standardization.std, dtype=torch.float32))

    def logits(self, features: torch.Tensor) -> torch.Tensor:
        standardized = (features - self.feature_mean) / self.feature_std
        # A missing input (NaN) is imputed with the training mean (0 after standardising),
        # so one silent sensor degrades a prediction instead of making it NaN. Training
        # refuses NaNs outright; in production the missing-values monitor watches the share.
        standardized = torch.where(
            torch.isnan(standardized), torch.zeros_like(standardized), standardized
        )
        return self.network(standardized).squeeze(-1)

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        return torch.sigmoid(self.logits(features))

    def architecture(self) -> dict:
        """The constructor arguments, enough to rebuild the module for a state dict."""
        return {
            "n_features": self.n_features,
            "hidden_sizes": list(self.hidden_sizes),
            "dropout": self.dropout,
        }


def predict_proba(model: nn.Module, features: np.ndarray, batch_size: int = 8192) -> np.ndarray:
    """P(class 1) for each row of ``features``, in eval mode, without gradients."""
    model.eval()
    outputs = []
    with torch.no_grad():
        for start in range(0, len(features), batch_size):
            batch = torch.as_tensor(features[start : start + batch_size], dtype=torch.float32)
            outputs.append(model(batch).numpy())
    return np.concatenate(outputs) if outputs else np.empty(0, dtype=np.float32)
