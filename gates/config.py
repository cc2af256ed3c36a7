"""Gate configuration (``gates/gates.yaml``): promotion gates, model checks, monitors.

Validated strictly (``extra="forbid"``); every error names the file and the key, e.g.
``gates/gates.yaml: model_checks.latency.p95_ms: Input should be greater than 0``.
Every threshold states its direction: a metric gate says ``greater_is_better``; a check
or monitor threshold is the largest acceptable value of a quantity named with its unit.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import Literal

# Monitor rules (model, validation, evaluation) live beside the statistics they read.
from driftgate.monitors.rules import Monitor
from pydantic import Field, field_validator, model_validator

from driftgate.core.yamlconfig import StrictModel, load_yaml_model


class MetricGate(StrictModel):
    """An absolute threshold on a held-out metric, plus optional comparison with the champion.

    Semantics follow ``mlflow.models.MetricThreshold``: with ``greater_is_better`` the
    candidate passes when ``candidate >= threshold``, ``candidate - champion >=
    min_absolute_change`` and ``candidate >= champion * (1 + min_relative_change)``
    (mirrored when lower is better). Champion comparisons apply only when a champion
    exists; both models are scored on the same held-out rows in the same gate run.
    """

    metric: Literal["accuracy", "roc_auc", "log_loss"]
    threshold: float | None = None
    greater_is_better: bool
    min_absolute_change: float | None = None
    min_relative_change: float | None = Field(None, ge=0.0)

    @model_validator(mode="after")
    def _something_to_check(self) -> MetricGate:
        if (
            self.threshold is None
            and self.min_absolute_change is None
            and self.min_relative_change is None
        ):
            raise ValueError(
                "give at least one of threshold, min_absolute_change, min_relative_change"
            )
        return self


class PromotionSettings(StrictModel):
    split: Literal["val", "test"] = Field(
        "test", description="held-out split both candidate and champion are scored on"
    )
    metrics: list[MetricGate] = Field(default_factory=list)


class FiniteOutputsCheck(StrictModel):
    enabled: bool = True
    edge_samples: int = Field(
        256, ge=1, description="random rows with every feature at a contract bound"
    )


class SignatureCheck(StrictModel):
    enabled: bool = True


class DegenerateOutputCheck(StrictModel):
    enabled: bool = True
    max_single_class_share: float = Field(0.98, gt=0.0, le=1.0)


class LatencyCheck(StrictModel):
    enabled: bool = True
    batch_sizes: list[int] = Field(default=[1, 1024], min_length=1)
    repeats: int = Field(30, ge=5)
    p50_ms: float = Field(200.0, gt=0.0)
    p95_ms: float = Field(2000.0, gt=0.0, description="the field's rule: answer within 2 s")

    @field_validator("batch_sizes")
    @classmethod
    def _positive(cls, sizes: list[int]) -> list[int]:
        if any(size < 1 for size in sizes):
            raise ValueError("batch sizes must be >= 1")
        return sizes


class MemoryCheck(StrictModel):
    enabled: bool = True
    batch_size: int = Field(10_000, ge=1)
    max_peak_mb: float = Field(512.0, gt=0.0, description="peak RSS growth during inference")


class ReloadParityCheck(StrictModel):
    enabled: bool = True
    max_abs_diff: float = Field(0.0, ge=0.0)


class ExportParityCheck(StrictModel):
    enabled: bool = True
    format: Literal["torchscript", "torch_export"] = "torchscript"
    max_abs_diff: float = Field(1e-5, ge=0.0)


class OverfittingCheck(StrictModel):
    enabled: bool = True
    metric: Literal["accuracy", "roc_auc", "log_loss"] = "roc_auc"
    max_gap: float = Field(0.1, ge=0.0, description="|train - val| of the metric")


class EnvironmentCheck(StrictModel):
    enabled: bool = True
    require_same: list[Literal["python", "torch"]] = Field(default=["python", "torch"])
    level: Literal["major", "minor", "patch"] = "minor"


class ModelChecks(StrictModel):
    finite_outputs: FiniteOutputsCheck = FiniteOutputsCheck()
    signature: SignatureCheck = SignatureCheck()
    degenerate_output: DegenerateOutputCheck = DegenerateOutputCheck()
    latency: LatencyCheck = LatencyCheck()
    memory: MemoryCheck = MemoryCheck()
    reload_parity: ReloadParityCheck = ReloadParityCheck()
    export_parity: ExportParityCheck = ExportParityCheck()
    overfitting: OverfittingCheck = OverfittingCheck()
    environment: EnvironmentCheck = EnvironmentCheck()


class GateConfig(StrictModel):
    promotion: PromotionSettings = PromotionSettings()
    model_checks: ModelChecks = ModelChecks()
    monitors: list[Monitor] = Field(default_factory=list)

    @field_validator("monitors")
    @classmethod
    def _unique_names(cls, monitors: list[Monitor]) -> list[Monitor]:
        names = [m.name for m in monitors]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ValueError(f"monitor names must be unique: {', '.join(duplicates)}")
        return monitors


def default_gates_path() -> Path:
    return Path(str(resources.files("driftgate.gates") / "gates.yaml"))


def load_gate_config(path: Path | str | None = None) -> GateConfig:
    """Load ``path`` (default: the committed ``gates/gates.yaml``).

    Raises ConfigError naming the file and the key.
    """
    return load_yaml_model(GateConfig, Path(path) if path else default_gates_path())
