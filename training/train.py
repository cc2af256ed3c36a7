"""Fit a model of any flavour (:mod:`driftgate.training.flavour`): seeded, clipped, early-stopped.

The loss follows the task: binary cross-entropy on the logit, cross-entropy over the
classes, mean squared error (on the standardised target for the built-in model, which
rescales its output).

Plain functions, no tracking: the caller decides what to log. Training fails loudly
(:class:`TrainingDivergedError`) the moment the loss stops being finite, instead of
registering a model full of NaNs.
"""

from __future__ import annotations

import copy
import logging
import math
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch import nn

from driftgate.core.errors import EXIT_CHECK_FAILED, DriftgateError
from driftgate.training.model import Standardization, TabularClassifier
from driftgate.training.params import TrainParams

log = logging.getLogger(__name__)


class TrainingDivergedError(DriftgateError, RuntimeError):
    """The loss became NaN or infinite; the message says where and what to try.

    Exit code 1: the data and config were usable, the training run failed its own check.
    """

    exit_code = EXIT_CHECK_FAILED


@dataclass(frozen=True)
class EpochRecord:
    epoch: int
    train_loss: float
    val_loss: float


LOSSES = {
    "binary": nn.BCEWithLogitsLoss,
    "multiclass": nn.CrossEntropyLoss,
    "regression": nn.MSELoss,
}


@dataclass
class TrainingResult:
    model: nn.Module
    history: list[EpochRecord] = field(default_factory=list)
    best_epoch: int = 0
    stopped_early: bool = False
    # The flavour.ModelSpec the model was built for (set by the training job).
    spec: Any = None

    @property
    def epochs_run(self) -> int:
        return len(self.history)


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def _check_finite(loss: float, where: str, params: TrainParams) -> None:
    if not math.isfinite(loss):
        raise TrainingDivergedError(
            f"training loss became {loss} {where}; lower train.lr (now {params.lr}) "
            f"or check the inputs for extreme values"
        )


def train_classifier(
    train_x: np.ndarray,
    train_y: np.ndarray,
    val_x: np.ndarray,
    val_y: np.ndarray,
    params: TrainParams,
    on_epoch: Callable[[EpochRecord], None] | None = None,
) -> TrainingResult:
    """Train the built-in binary classifier on numeric features (the demo's model).

    The standardisation is fitted on ``train_x`` only and stored in the model. Inputs
    must already be finite float matrices (see ``training.data.feature_matrix``).
    """
    seed_everything(params.seed)
    model = TabularClassifier(
        n_features=train_x.shape[1],
        hidden_sizes=params.hidden_sizes,
        dropout=params.dropout,
        standardization=Standardization.fit(train_x),
    )
    return train_model(model, train_x, train_y, val_x, val_y, params, "binary", on_epoch)


def _targets(model: nn.Module, y: np.ndarray, task: str) -> torch.Tensor:
    if task == "multiclass":
        return torch.as_tensor(np.asarray(y, dtype=np.int64))
    target = torch.as_tensor(np.asarray(y, dtype=np.float32))
    if task == "regression" and hasattr(model, "target_mean"):
        # The built-in model learns the standardised target and rescales its output.
        target = (target - model.target_mean) / model.target_std
    return target


def train_model(
    model: nn.Module,
    train_x: np.ndarray,
    train_y: np.ndarray,
    val_x: np.ndarray,
    val_y: np.ndarray,
    params: TrainParams,
    task: str = "binary",
    on_epoch: Callable[[EpochRecord], None] | None = None,
) -> TrainingResult:
    """Train ``model`` (its ``logits``) on (train_x, train_y), early-stop on validation
    loss, return the best state. Seed before building the model (its initial weights)."""
    optimizer = torch.optim.Adam(model.parameters(), lr=params.lr, weight_decay=params.weight_decay)
    loss_fn = LOSSES[task]()
    features = torch.as_tensor(train_x, dtype=torch.float32)
    labels = _targets(model, train_y, task)
    val_features = torch.as_tensor(val_x, dtype=torch.float32)
    val_labels = _targets(model, val_y, task)
    shuffler = torch.Generator().manual_seed(params.seed)

    result = TrainingResult(model=model)
    best_loss, best_state, epochs_without_gain = math.inf, None, 0
    for epoch in range(1, params.max_epochs + 1):
        model.train()
        order = torch.randperm(len(features), generator=shuffler)
        total, seen = 0.0, 0
        for batch_number, start in enumerate(range(0, len(order), params.batch_size)):
            index = order[start : start + params.batch_size]
            optimizer.zero_grad()
            loss = loss_fn(model.logits(features[index]), labels[index])
            _check_finite(loss.item(), f"at epoch {epoch}, batch {batch_number}", params)
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), params.grad_clip_norm)
            optimizer.step()
            total += loss.item() * len(index)
            seen += len(index)
        model.eval()
        with torch.no_grad():
            val_loss = loss_fn(model.logits(val_features), val_labels).item()
        _check_finite(val_loss, f"on the validation split after epoch {epoch}", params)
        record = EpochRecord(epoch=epoch, train_loss=total / seen, val_loss=val_loss)
        result.history.append(record)
        if on_epoch is not None:
            on_epoch(record)
        if val_loss < best_loss - params.min_delta:
            best_loss, epochs_without_gain = val_loss, 0
            best_state, result.best_epoch = copy.deepcopy(model.state_dict()), epoch
        else:
            epochs_without_gain += 1
            if epochs_without_gain >= params.patience:
                result.stopped_early = True
                log.info("early stop at epoch %d (best epoch %d)", epoch, result.best_epoch)
                break
    if best_state is not None:
        model.load_state_dict(best_state)
    model.eval()
    return result
