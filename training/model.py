"""The built-in PyTorch tabular model: it carries its own preprocessing.

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


# Width of a categorical feature's embedding: half its codes (unseen bucket included), capped.
MAX_EMBEDDING_DIM = 8


def embedding_dim(cardinality: int) -> int:
    return max(1, min(MAX_EMBEDDING_DIM, (cardinality + 2) // 2))


class TabularClassifier(nn.Module):
    """The built-in MLP ("builtin" flavour) for every task.

    ``forward`` returns the task's output: ``binary`` P(class 1), shape ``(batch,)``;
    ``multiclass`` one probability per class, shape ``(batch, n_outputs)``;
    ``regression`` the predicted value, shape ``(batch,)``. ``logits`` is the raw
    output the loss is computed on.

    ``cardinalities`` holds, per input column, the number of categories of a categorical
    feature (``None`` for numeric ones). A categorical column carries a code (see
    :mod:`driftgate.training.features`); it goes through an embedding with one more row,
    the unseen bucket, which also takes a missing value (NaN) and any out-of-range code.
    Numeric columns are standardised, NaN imputed with the training mean. With all
    columns numeric and ``task="binary"`` the module is exactly the original one (same
    parameters created in the same order, so a seed gives the same weights).
    """

    def __init__(
        self,
        n_features: int,
        hidden_sizes: Sequence[int] = (32, 16),
        dropout: float = 0.1,
        standardization: Standardization | None = None,
        task: str = "binary",
        n_outputs: int = 1,
        cardinalities: Sequence[int | None] | None = None,
    ) -> None:
        super().__init__()
        self.n_features = n_features
        self.hidden_sizes = tuple(hidden_sizes)
        self.dropout = dropout
        self.task = task
        self.n_outputs = int(n_outputs)
        self.cardinalities = tuple(cardinalities) if cardinalities else (None,) * n_features
        if len(self.cardinalities) != n_features:
            raise ValueError(f"{len(self.cardinalities)} cardinalities for {n_features} features")
        if task == "multiclass" and self.n_outputs < 2:
            raise ValueError("a multiclass model needs n_outputs >= 2")
        if task != "multiclass" and self.n_outputs != 1:
            raise ValueError(f"a {task} model has one output, not {self.n_outputs}")
        numeric = [i for i, c in enumerate(self.cardinalities) if c is None]
        categorical = [i for i, c in enumerate(self.cardinalities) if c is not None]
        self._mixed = bool(categorical)
        self.register_buffer("feature_mean", torch.zeros(n_features))
        self.register_buffer("feature_std", torch.ones(n_features))
        if standardization is not None:
            self.set_standardization(standardization)
        width = n_features
        if self._mixed:
            self.register_buffer("numeric_index", torch.tensor(numeric, dtype=torch.long))
            self.register_buffer("categorical_index", torch.tensor(categorical, dtype=torch.long))
            self.register_buffer(
                "unseen_code",
                torch.tensor([self.cardinalities[i] for i in categorical], dtype=torch.float32),
            )
            width = len(numeric)
        if task == "regression":
            # The target is standardised for the loss; the output is in the target's units.
            self.register_buffer("target_mean", torch.zeros(()))
            self.register_buffer("target_std", torch.ones(()))
        layers: list[nn.Module] = []
        if self._mixed:
            width += sum(embedding_dim(self.cardinalities[i]) for i in categorical)
        for hidden in self.hidden_sizes:
            layers += [nn.Linear(width, hidden), nn.ReLU(), nn.Dropout(dropout)]
            width = hidden
        layers.append(nn.Linear(width, self.n_outputs))
        self.network = nn.Sequential(*layers)
        # Created after the network, so an all-numeric model's seeded weights are unchanged.
        self.embeddings = nn.ModuleList(
            nn.Embedding(self.cardinalities[i] + 1, embedding_dim(self.cardinalities[i]))
            for i in categorical
        )

    def set_standardization(self, standardization: Standardization) -> None:
        if standardization.mean.shape != (self.n_features,):
            raise ValueError(
                f"standardization has {standardization.mean.shape[0]} features, "
                f"model expects {self.n_features}"
            )
        self.feature_mean.copy_(torch.as_tensor(standardization.mean, dtype=torch.float32))
        self.feature_std.copy_(torch.as_tensor(standardization.std, dtype=torch.float32))

    def set_target_scale(self, mean: float, std: float) -> None:
        """The regression target's training mean and std (the output is rescaled by them)."""
        self.target_mean.fill_(float(mean))
        self.target_std.fill_(float(std) if std >= MIN_STD else 1.0)

    def _inputs(self, features: torch.Tensor) -> torch.Tensor:
        standardized = (features - self.feature_mean) / self.feature_std
        # A missing input (NaN) is imputed with the training mean (0 after standardising),
        # so one silent sensor degrades a prediction instead of making it NaN. Training
        # refuses NaNs outright; in production the missing-values monitor watches the share.
        standardized = torch.where(
            torch.isnan(standardized), torch.zeros_like(standardized), standardized
        )
        if not self._mixed:
            return standardized
        parts = [torch.index_select(standardized, 1, self.numeric_index)]
        codes = torch.index_select(features, 1, self.categorical_index)
        # NaN, a negative or a too-large code all land in the unseen bucket.
        unseen = self.unseen_code.expand_as(codes)
        valid = (codes >= 0) & (codes < unseen)
        codes = torch.where(valid, codes, unseen).long()
        for position, embedding in enumerate(self.embeddings):
            parts.append(embedding(codes[:, position]))
        return torch.cat(parts, dim=1)

    def logits(self, features: torch.Tensor) -> torch.Tensor:
        raw = self.network(self._inputs(features))
        return raw if self.task == "multiclass" else raw.squeeze(-1)

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        raw = self.logits(features)
        if self.task == "multiclass":
            return torch.softmax(raw, dim=-1)
        if self.task == "regression":
            return raw * self.target_std + self.target_mean
        return torch.sigmoid(raw)

    def architecture(self) -> dict:
        """The constructor arguments, enough to rebuild the module for a state dict."""
        architecture = {
            "n_features": self.n_features,
            "hidden_sizes": list(self.hidden_sizes),
            "dropout": self.dropout,
        }
        if self.task != "binary" or self._mixed:
            architecture |= {
                "task": self.task,
                "n_outputs": self.n_outputs,
                "cardinalities": list(self.cardinalities),
            }
        return architecture


# The same module under the name that says what it is now.
TabularModel = TabularClassifier


def predict_proba(model: nn.Module, features: np.ndarray, batch_size: int = 8192) -> np.ndarray:
    """The model's output for each row of ``features``, in eval mode, without gradients."""
    model.eval()
    outputs = []
    with torch.no_grad():
        for start in range(0, len(features), batch_size):
            batch = torch.as_tensor(features[start : start + batch_size], dtype=torch.float32)
            outputs.append(model(batch).numpy())
    return np.concatenate(outputs) if outputs else np.empty(0, dtype=np.float32)
