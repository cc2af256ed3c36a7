"""Training hyper-parameters, importable without torch (the CLI and config load them)."""

from __future__ import annotations

from pydantic import Field

from driftgate.core.yamlconfig import StrictModel


class TrainParams(StrictModel):
    """Hyper-parameters: the ``train`` section of ``params.yaml`` (shared with DVC)."""

    seed: int = 42
    hidden_sizes: list[int] = Field(default=[32, 16], min_length=1)
    dropout: float = Field(0.1, ge=0.0, lt=1.0)
    lr: float = Field(3e-3, gt=0.0)
    weight_decay: float = Field(1e-4, ge=0.0)
    batch_size: int = Field(128, ge=1)
    max_epochs: int = Field(60, ge=1)
    patience: int = Field(8, ge=1, description="epochs without val-loss improvement")
    min_delta: float = Field(1e-4, ge=0.0, description="improvement that resets patience")
    grad_clip_norm: float = Field(1.0, gt=0.0)
