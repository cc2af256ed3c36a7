"""The built-in PyTorch tabular model: it carries its own preprocessing.

The standardisation statistics (mean and standard deviation per feature) are computed
on the training split only and stored as buffers of the module, so they are saved with
the weights and applied identically wherever the model is loaded: in the gate, in the
service and in MLflow's pyfunc wrapper. Missing inputs (NaN) are imputed with the
training mean, inside the module for the same reason; a feature that had missing values
in the training split also gets a missing-indicator input (numeric) or its own missing
category (categorical), so the model learns what a missing value says. Which features
those are is a constructor argument (``missing``), stored in ``architecture.json``.
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
        """Over the values present: a missing value (NaN) is left out, so the mean is
        the training mean of what was seen, the value a missing input is imputed with."""
        values = np.asarray(train_features, dtype=np.float64)
        if values.ndim != 2 or values.shape[0] == 0:
            raise ValueError(f"expected a non-empty 2-D feature matrix, got shape {values.shape}")
        # Complete columns keep the exact arithmetic of before (seeded figures unchanged).
        mean, std = values.mean(axis=0), values.std(axis=0)
        for column in np.flatnonzero(np.isnan(values).any(axis=0)):
            present = values[~np.isnan(values[:, column]), column]
            # A column missing on every row is imputed with 0 (its indicator says it all).
            mean[column] = present.mean() if len(present) else 0.0
            std[column] = present.std() if len(present) else 1.0
        std = np.where(std < MIN_STD, 1.0, std)
        return cls(mean=mean, std=std)


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
        missing: Sequence[int] = (),
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
        # Features that had missing values in the training split: a numeric one gets a
        # missing-indicator input (is it missing?) beside its imputed value, so the model
        # learns what "missing" means instead of reading it as the mean; a categorical
        # one gets its own missing category (an embedding row after the unseen bucket).
        self.missing = tuple(sorted(int(i) for i in missing))
        if any(not 0 <= i < n_features for i in self.missing):
            raise ValueError(f"missing names feature(s) outside 0..{n_features - 1}")
        indicated = [i for i in self.missing if self.cardinalities[i] is None]
        missing_level = {i for i in self.missing if self.cardinalities[i] is not None}
        # Buffers only when used: an empty index would not export to ONNX, and a model
        # without missing values keeps the state dict of before.
        self._indicated = bool(indicated)
        self._missing_level = bool(missing_level)
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
        if self._indicated:
            self.register_buffer("indicator_index", torch.tensor(indicated, dtype=torch.long))
            width += len(indicated)
        if self._missing_level:
            self.register_buffer(
                "missing_code",
                torch.tensor(
                    [
                        # The missing category's code; without one, NaN stays unseen.
                        self.cardinalities[i] + (1 if i in missing_level else 0)
                        for i in categorical
                    ],
                    dtype=torch.float32,
                ),
            )
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
            nn.Embedding(
                self.cardinalities[i] + 1 + (i in missing_level),
                embedding_dim(self.cardinalities[i]),
            )
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
        # so one silent sensor degrades a prediction instead of making it NaN. A feature
        # missing in training also has its indicator input (below), so the model learnt
        # what its absence means; in production the missing-share monitor watches it.
        absent = torch.isnan(standardized)
        standardized = torch.where(absent, torch.zeros_like(standardized), standardized)
        indicators = []
        if self._indicated:
            indicators = [torch.index_select(absent, 1, self.indicator_index).to(features.dtype)]
        if not self._mixed:
            return torch.cat([standardized, *indicators], dim=1) if indicators else standardized
        parts = [torch.index_select(standardized, 1, self.numeric_index), *indicators]
        codes = torch.index_select(features, 1, self.categorical_index)
        # A negative or a too-large code lands in the unseen bucket, and so does NaN
        # unless the feature was missing in training (its own missing category).
        unseen = self.unseen_code.expand_as(codes)
        valid = (codes >= 0) & (codes < unseen)
        codes_or_unseen = torch.where(valid, codes, unseen)
        if self._missing_level:
            missing_code = self.missing_code.expand_as(codes)
            codes_or_unseen = torch.where(torch.isnan(codes), missing_code, codes_or_unseen)
        codes = codes_or_unseen.long()
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
        if self.missing:
            architecture["missing"] = list(self.missing)
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
