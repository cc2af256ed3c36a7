"""Gate configuration (``gates/gates.yaml``): promotion gates, model checks, monitors.

Validated strictly (``extra="forbid"``); every error names the file and the key, e.g.
``gates/gates.yaml: model_checks.latency.p95_ms: Input should be greater than 0``.
Every threshold states its direction: a metric gate says ``greater_is_better``; a check
or monitor threshold is the largest acceptable value of a quantity named with its unit.
"""

from __future__ import annotations

import importlib
import sys
from importlib import resources
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from driftgate.core.yamlconfig import (
    ConfigError,
    StrictModel,
    read_yaml_mapping,
    validate_mapping,
)

# Monitor rules (model, validation, evaluation) live beside the statistics they read.
from driftgate.gates.checks import CheckSettings, import_check_modules, validate_check_settings
from driftgate.monitors.rules import Monitor
from driftgate.training.evaluate import MetricName


class MetricGate(StrictModel):
    """An absolute threshold on a held-out metric, plus optional comparison with the champion.

    Semantics follow ``mlflow.models.MetricThreshold``: with ``greater_is_better`` the
    candidate passes when ``candidate >= threshold``, ``candidate - champion >=
    min_absolute_change`` and ``candidate >= champion * (1 + min_relative_change)``
    (mirrored when lower is better). Champion comparisons apply only when a champion
    exists; both models are scored on the same held-out rows in the same gate run.
    """

    metric: MetricName
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


class RecentSlice(StrictModel):
    """``promotion.recent``: the gate also scores candidate and champion on the newest
    labelled production rows of the held-out split (the rows a retrain's data window
    added to it, :mod:`driftgate.jobs.retrain_data`), reported apart from the split.

    The candidate must be better than the champion there beyond the slice's sampling
    error (a one-sided paired sign-flip test, :mod:`driftgate.gates.paired`), whatever
    the configured split says; the ``trivial_baseline`` check judges it on the same rows.
    """

    rows: int = Field(
        1000, ge=1, description="at most this many of the newest labelled production rows"
    )
    min_rows: int = Field(
        30,
        ge=1,
        description="fewer labelled production rows: the slice is not judged (reported as "
        "not applicable) and the other gates decide",
    )
    metric: Literal["accuracy", "log_loss", "rmse", "mae"] | None = Field(
        None,
        description="per-row metric compared; default accuracy (classification), rmse (regression)",
    )
    confidence: float = Field(
        0.95,
        gt=0.5,
        lt=1.0,
        description="the candidate counts as better when a one-sided paired test says so "
        "at this confidence (p <= 1 - confidence)",
    )

    @model_validator(mode="after")
    def _min_rows_fit(self) -> RecentSlice:
        if self.min_rows > self.rows:
            raise ValueError(f"min_rows {self.min_rows} is more than rows {self.rows}")
        return self


class PromotionSettings(StrictModel):
    split: Literal["val", "test"] = Field(
        "test", description="held-out split both candidate and champion are scored on"
    )
    metrics: list[MetricGate] = Field(default_factory=list)
    recent: RecentSlice | None = Field(
        None,
        description="also judge candidate and champion on the newest labelled production "
        "rows (None: the configured split alone)",
    )


class ModelChecks(BaseModel):
    """``model_checks:``: one key per registered check (:mod:`driftgate.gates.checks`),
    each validated by that check's own settings model; ``model_checks.latency`` is the
    latency check's settings. An unknown key fails naming it and listing the known checks.
    """

    # The keys come from the registry, so pydantic cannot list them as fields: they are
    # validated (strictly, unknown keys refused) by the registry before they land here.
    model_config = ConfigDict(extra="allow", frozen=True)

    @model_validator(mode="before")
    @classmethod
    def _validate_against_the_registry(cls, data: object) -> dict:
        return validate_check_settings({} if data is None else data)

    def settings(self) -> dict[str, CheckSettings]:
        """Every check's settings by name, in run order."""
        return dict(self.model_extra or {})


class GateConfig(StrictModel):
    plugins: list[str] = Field(
        default_factory=list,
        description="modules or packages of your own drift statistics, gate checks or "
        "monitor actions, imported (from this file's folder first) before the rest of "
        "this file is validated; each registers itself on import, as the built-in ones do",
    )
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


def load_plugins(names: object, path: Path) -> list[str]:
    """Import the ``plugins:`` of the gate config at ``path``: each a module, or a package
    whose public modules are all imported (as :mod:`driftgate.gates.checks` imports its
    own), with ``path``'s folder first on ``sys.path`` (a module beside ``gates.yaml``
    needs no install, as ``model.factory`` beside ``driftgate.yaml``). Returns the
    modules imported; ConfigError (exit 2) naming ``plugins.<i>`` otherwise.
    """
    if names is None:
        return []
    if not isinstance(names, list) or not all(isinstance(n, str) and n for n in names):
        raise ConfigError(f"{path}: plugins: a list of module or package names")
    if not names:
        return []
    folder = str(path.resolve().parent)
    if folder not in sys.path:
        sys.path.insert(0, folder)
    imported = []
    for i, name in enumerate(names):
        try:
            module = importlib.import_module(name)
            imported.append(name)
            if hasattr(module, "__path__"):  # a package: every module in it
                imported += [f"{name}.{m}" for m in import_check_modules(name)]
        except Exception as exc:
            raise ConfigError(
                f"{path}: plugins.{i}: cannot import {name!r}: {type(exc).__name__}: {exc}"
            ) from exc
    return imported


def load_gate_config(path: Path | str | None = None) -> GateConfig:
    """Load ``path`` (default: the committed ``gates/gates.yaml``), importing its
    ``plugins:`` first, since the monitors and checks are validated against the
    registries the plugins add to.

    Raises ConfigError naming the file and the key.
    """
    path = Path(path) if path else default_gates_path()
    data = read_yaml_mapping(path)
    load_plugins(data.get("plugins"), path)
    return validate_mapping(GateConfig, data, path)
