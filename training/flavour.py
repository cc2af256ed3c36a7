"""The model-flavour seam: how a model is built, trained, saved, rebuilt, exported and called.

The trainer, the gate and the service speak to a model only through a
:class:`ModelFlavour` and a :class:`ModelSpec` (what the model was built for: the task,
its feature specs, its classes), never through a concrete class. Two flavours:

* ``builtin`` — :class:`~driftgate.training.model.TabularClassifier`, the default;
* ``factory`` — a user's ``nn.Module`` from ``model.factory: "pkg.mod:build"``, trained
  by driftgate's trainer, or by the user's own loop ``model.train: "pkg.mod:fit"``;
* ``train`` — ``model.train`` without a factory: the user's loop builds and trains the
  module. Its weights are logged, but nothing can rebuild the module from them, so
  :meth:`TrainFlavour.rebuild` refuses and the gate reports the checks needing a
  rebuilt module (reload, export and registry parity) as not applicable.

Every trainable module has ``logits(x)`` (the raw output the loss is computed on) and
``forward(x)`` (the task's output: binary P(class 1) ``(n,)``, multiclass one
probability per class ``(n, K)``, regression the value ``(n,)``). A user's module
returns the raw output from its ``forward``; :class:`TaskHead` wraps it so the logged
and exported module has the same outputs as the built-in one.

What a flavour writes (:meth:`ModelFlavour.save`) is the run's ``weights/`` folder:
``state_dict.pt`` (read back with ``weights_only=True``) and ``architecture.json``,
which holds the :class:`ModelSpec` (``flavour``, ``task``, ``features``, ``classes``,
``factory``, ``params``, ``builtin``). MLflow calls stay in :mod:`driftgate.registry`.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import logging
import re
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import torch
from torch import nn

from driftgate.core.errors import EXIT_CHECK_FAILED, DriftgateError
from driftgate.core.yamlconfig import ConfigError
from driftgate.training.features import FeatureSpec, numeric_specs
from driftgate.training.model import Standardization, TabularClassifier, predict_proba
from driftgate.training.params import TrainParams

ARCHITECTURE_FILE = "architecture.json"
STATE_FILE = "state_dict.pt"
BUILTIN = "builtin"
FACTORY = "factory"
TRAIN = "train"  # model.train without model.factory


class OnnxExportError(DriftgateError, ValueError):
    """A module ``torch.onnx.export`` cannot export; the message names the operation or
    the line of the module's code that stopped it (the ``export_parity`` check reports it).

    Exit code 1: the configuration was usable; the model failed a model check.
    """

    exit_code = EXIT_CHECK_FAILED


@dataclass(frozen=True)
class OnnxExport:
    """An ONNX model of a module: the serialised ``ModelProto`` and its opset."""

    data: bytes
    opset: int
    input_name: str


class ModelOutputError(DriftgateError, ValueError):
    """A module's output has the wrong shape for its task (the ``output_shape`` check).

    Exit code 1: the configuration was usable; the model failed a model check.
    """

    exit_code = EXIT_CHECK_FAILED


@dataclass(frozen=True)
class ModelSpec:
    """What a model version was built for; stored in ``architecture.json`` and read back."""

    task: str = "binary"
    features: tuple[FeatureSpec, ...] = ()
    classes: tuple[str, ...] = ()  # multiclass: the labels, in output-column order
    flavour: str = BUILTIN
    factory: str | None = None  # "pkg.mod:build" of the factory flavour
    train: str | None = None  # "pkg.mod:fit" when the user's loop trained it
    params: Mapping[str, Any] = field(default_factory=dict)  # what the factory was called with
    builtin: Mapping[str, Any] = field(default_factory=dict)  # TabularClassifier's arguments

    @property
    def n_outputs(self) -> int:
        return len(self.classes) if self.task == "multiclass" else 1

    @property
    def feature_names(self) -> list[str]:
        return [f.name for f in self.features]

    def to_dict(self) -> dict:
        return {
            "flavour": self.flavour,
            "task": self.task,
            "features": [f.to_dict() for f in self.features],
            "classes": list(self.classes),
            "factory": self.factory,
            "train": self.train,
            "params": dict(self.params),
            "builtin": dict(self.builtin),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], features: Sequence[str] = ()) -> ModelSpec:
        """Read ``architecture.json``; one without ``flavour`` is a version logged before
        flavours existed: the built-in binary MLP on numeric ``features``."""
        if "flavour" not in data:
            return cls(features=tuple(numeric_specs(features)), builtin=dict(data))
        return cls(
            task=data.get("task", "binary"),
            features=tuple(FeatureSpec.from_dict(f) for f in data.get("features", ())),
            classes=tuple(str(c) for c in data.get("classes", ())),
            flavour=data["flavour"],
            factory=data.get("factory"),
            train=data.get("train"),
            params=dict(data.get("params") or {}),
            builtin=dict(data.get("builtin") or {}),
        )


class TaskHead(nn.Module):
    """A user's module (raw output) made into the task's output, like the built-in one."""

    def __init__(self, core: nn.Module, task: str) -> None:
        super().__init__()
        self.core = core
        self.task = task

    def logits(self, features: torch.Tensor) -> torch.Tensor:
        raw = self.core(features)
        if self.task != "multiclass" and raw.dim() == 2 and raw.shape[-1] == 1:
            raw = raw.squeeze(-1)
        return raw

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        raw = self.logits(features)
        if self.task == "multiclass":
            return torch.softmax(raw, dim=-1)
        if self.task == "regression":
            return raw
        return torch.sigmoid(raw)


@dataclass(frozen=True)
class TrainingData:
    """What a user's ``model.train`` function is given: float32 matrices in spec order
    (categorical columns as codes) and targets (0/1, class index, or value)."""

    train_x: np.ndarray
    train_y: np.ndarray
    val_x: np.ndarray
    val_y: np.ndarray
    spec: ModelSpec


class ModelFlavour(Protocol):
    """The one interface the trainer, the gate and the service use for a model."""

    name: str

    def build(self, spec: ModelSpec, params: TrainParams, train_x: np.ndarray,
              train_y: np.ndarray) -> nn.Module:  # fmt: skip
        """A fresh trainable module (``logits`` and ``forward``) for ``spec``."""

    def rebuild(self, spec: ModelSpec, state: Mapping[str, torch.Tensor] | None) -> nn.Module:
        """The module of a logged version from its state dict (None: untrained)."""

    def save(self, model: nn.Module, spec: ModelSpec, folder: Path) -> Path:
        """Write the ``weights`` folder (state dict and ``architecture.json``)."""

    def load(self, folder: Path, features: Sequence[str] = ()) -> tuple[nn.Module, ModelSpec]:
        """Read a ``weights`` folder back (``weights_only=True``) and rebuild the module."""

    def export(self, model: nn.Module, example: np.ndarray) -> None:
        """Check that ``torch.export`` can export ``model`` (what MLflow logs as pt2)."""

    def export_onnx(self, model: nn.Module, example: np.ndarray) -> OnnxExport:
        """``model`` as ONNX with a dynamic batch dimension; OnnxExportError naming the
        operation (or the line of code) that cannot be exported."""

    def predict(self, model: nn.Module, matrix: np.ndarray) -> np.ndarray:
        """The task's output for a float32 matrix, in eval mode, without gradients."""


def plugin_setting(spec_or_flavour: ModelSpec | str) -> str:
    """The setting a module comes from, as errors name it."""
    flavour = getattr(spec_or_flavour, "flavour", spec_or_flavour)
    return {FACTORY: "model.factory", TRAIN: "model.train"}.get(flavour, "the built-in model")


class _TorchFlavour:
    """What the torch flavours share: saving, loading, exporting, predicting."""

    name = ""

    def rebuild(self, spec, state):  # pragma: no cover - overridden
        raise NotImplementedError

    def save(self, model: nn.Module, spec: ModelSpec, folder: Path) -> Path:
        folder.mkdir(parents=True, exist_ok=True)
        torch.save(model.state_dict(), folder / STATE_FILE)
        (folder / ARCHITECTURE_FILE).write_text(json.dumps(spec.to_dict(), indent=2))
        return folder

    def load(self, folder: Path, features: Sequence[str] = ()) -> tuple[nn.Module, ModelSpec]:
        spec = ModelSpec.from_dict(json.loads((folder / ARCHITECTURE_FILE).read_text()), features)
        state = torch.load(folder / STATE_FILE, weights_only=True)
        return flavour_of(spec).rebuild(spec, state), spec

    def export(self, model: nn.Module, example: np.ndarray) -> None:
        setting = plugin_setting(self.name)
        model.eval()
        try:
            torch.export.export(model, (torch.as_tensor(example, dtype=torch.float32),))
        except Exception as exc:
            raise ConfigError(
                f"{setting}: the module cannot be exported with torch.export (pt2), which "
                f"is how driftgate logs and serves models: {type(exc).__name__}: {exc}"
            ) from exc

    def export_onnx(self, model: nn.Module, example: np.ndarray) -> OnnxExport:
        setting = plugin_setting(self.name)
        model.eval()
        batch = torch.export.Dim("batch", min=1)
        try:
            with torch.no_grad(), _quiet_onnx_registry():
                program = torch.onnx.export(
                    model,
                    (torch.as_tensor(example, dtype=torch.float32),),
                    dynamo=True,
                    dynamic_shapes=({0: batch},),
                    verbose=False,
                    report=False,
                )
            proto = program.model_proto
        except Exception as exc:
            raise OnnxExportError(
                f"{setting}: torch.onnx.export failed: {describe_export_failure(exc)}"
            ) from exc
        opset = next((o.version for o in proto.opset_import if o.domain in ("", "ai.onnx")), 0)
        return OnnxExport(proto.SerializeToString(), opset, proto.graph.input[0].name)

    def predict(self, model: nn.Module, matrix: np.ndarray) -> np.ndarray:
        return predict_proba(model, matrix)


@contextlib.contextmanager
def _quiet_onnx_registry():
    # The exporter warns on every export that torchvision's ops (nms, roi_align...) are
    # skipped because torchvision is not installed: nothing here uses them.
    registration = logging.getLogger("torch.onnx._internal.exporter._registration")
    level = registration.level
    registration.setLevel(logging.ERROR)
    try:
        yield
    finally:
        registration.setLevel(level)


_OPERATION = re.compile(r"op='([\w.:]+)'")
_OP_TARGET = re.compile(r"torch\.ops\.([\w.]+?)\.default")
_CODE_LINE = re.compile(r'File "([^"]+)", line (\d+), in (\w+)\n\s*(\S[^\n]*)')


def describe_export_failure(exc: BaseException) -> str:
    """What stopped an export, in one line: the innermost error, the operation it names
    (``aten.item``, ``prims.bessel_j0``) and the line of the module's code, when known.

    torch's exporter wraps the cause in pages of advice; the operator needs the op."""
    chain: list[BaseException] = []
    while exc is not None and exc not in chain:
        chain.append(exc)
        exc = exc.__cause__ or exc.__context__
    text = "\n".join(str(e) for e in chain)
    innermost = chain[-1]
    first = str(innermost).strip().splitlines()[0] if str(innermost).strip() else ""
    parts = [f"{type(innermost).__name__}: {first}".rstrip(": ")]
    if op := _OPERATION.search(text) or _OP_TARGET.search(text):
        parts.append(f"operation {op[1]}")
    code = _CODE_LINE.search(text)
    if code:
        parts.append(f"at {Path(code[1]).name}:{code[2]} in {code[3]}: {code[4].strip()}")
    return "; ".join(parts)


class BuiltinFlavour(_TorchFlavour):
    """:class:`TabularClassifier`: numeric inputs standardised, categorical embedded."""

    name = BUILTIN

    def build(self, spec, params, train_x, train_y):
        model = TabularClassifier(**_builtin_arguments(spec, params, train_x.shape[1]))
        model.set_standardization(_numeric_standardization(spec, train_x))
        if spec.task == "regression":
            target = np.asarray(train_y, dtype=np.float64)
            model.set_target_scale(target.mean(), target.std())
        return model

    def rebuild(self, spec, state):
        model = TabularClassifier(**spec.builtin)
        if state is not None:
            model.load_state_dict(state)
        return model.eval()


class FactoryFlavour(_TorchFlavour):
    """A user's module: ``model.factory`` builds it, ``model.train`` may train it."""

    name = FACTORY

    def build(self, spec, params, train_x, train_y):
        return TaskHead(_call_factory(spec), spec.task)

    def rebuild(self, spec, state):
        model = TaskHead(_call_factory(spec), spec.task)
        if state is not None:
            try:
                model.load_state_dict(state)
            except RuntimeError as exc:
                raise ConfigError(
                    f"model.factory {spec.factory!r} now builds a module that does not fit "
                    f"the logged weights (was the factory changed since training?): {exc}"
                ) from exc
        return model.eval()


class TrainFlavour(_TorchFlavour):
    """``model.train`` without ``model.factory``: the user's loop builds the module.

    The trained module is logged like any other (pt2 model, state dict), served from the
    pt2 graph and gated through its pyfunc; without a factory no code knows how to build
    the module the state dict belongs to, so it cannot be rebuilt from its weights.
    """

    name = TRAIN

    def build(self, spec, params, train_x, train_y):
        return None  # the user's loop builds it (run_user_training)

    def rebuild(self, spec, state):
        raise ConfigError(no_rebuild_reason(spec))


def no_rebuild_reason(spec: ModelSpec) -> str:
    """Why a ``model.train`` module without a factory cannot be rebuilt from its weights."""
    return (
        f"model.train {spec.train!r} without model.factory: no factory to rebuild the "
        "module from its logged weights (set model.factory to have reload, export and "
        "registry parity checked)"
    )


FLAVOURS: dict[str, ModelFlavour] = {
    BUILTIN: BuiltinFlavour(),
    FACTORY: FactoryFlavour(),
    TRAIN: TrainFlavour(),
}


def flavour_of(spec: ModelSpec) -> ModelFlavour:
    try:
        return FLAVOURS[spec.flavour]
    except KeyError:
        raise ConfigError(
            f"unknown model flavour {spec.flavour!r}; known: {', '.join(FLAVOURS)}"
        ) from None


def _builtin_arguments(spec: ModelSpec, params: TrainParams, n_features: int) -> dict:
    arguments: dict[str, Any] = {
        "n_features": n_features,
        "hidden_sizes": list(params.hidden_sizes),
        "dropout": params.dropout,
    }
    categorical = any(f.kind == "categorical" for f in spec.features)
    # The features missing in the training split (FeatureSpec.missing): the module
    # learns them (an indicator input, or a missing category).
    missing = [i for i, f in enumerate(spec.features) if f.missing]
    if missing:
        arguments["missing"] = missing
    if spec.task != "binary" or categorical:
        arguments |= {
            "task": spec.task,
            "n_outputs": spec.n_outputs,
            "cardinalities": [
                len(f.categories) if f.kind == "categorical" else None for f in spec.features
            ],
        }
    return arguments


def _numeric_standardization(spec: ModelSpec, train_x: np.ndarray) -> Standardization:
    """Mean/std per column on the training split; a categorical column keeps 0/1 (its
    codes are embedded, not standardised)."""
    fitted = Standardization.fit(train_x)  # over the values present (NaN left out)
    categorical = [i for i, f in enumerate(spec.features) if f.kind == "categorical"]
    if not categorical:
        return Standardization.fit(train_x)
    mean, std = fitted.mean.copy(), fitted.std.copy()
    mean[categorical], std[categorical] = 0.0, 1.0
    return Standardization(mean=mean, std=std)


def with_builtin_arguments(spec: ModelSpec, model: nn.Module) -> ModelSpec:
    """``spec`` with the built-in module's constructor arguments (to rebuild it)."""
    if isinstance(model, TabularClassifier):
        return ModelSpec(**{**spec.__dict__, "builtin": model.architecture()})
    return spec


def resolve_callable(reference: str, setting: str, root: Path | None = None) -> Callable:
    """``"pkg.mod:name"`` as a callable; ConfigError (exit 2) naming ``setting`` otherwise.

    ``root`` (the config file's folder) is put on ``sys.path`` first, so a module beside
    ``driftgate.yaml`` imports without being installed.
    """
    module_name, _, attribute = str(reference).partition(":")
    if not module_name or not attribute:
        raise ConfigError(f"{setting}: {reference!r} is not of the form 'package.module:function'")
    if root is not None and str(root) not in sys.path:
        sys.path.insert(0, str(root))
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:
        raise ConfigError(
            f"{setting}: cannot import module {module_name!r}: {type(exc).__name__}: {exc}"
        ) from exc
    target = getattr(module, attribute, None)
    if target is None or not callable(target):
        raise ConfigError(f"{setting}: module {module_name!r} has no function {attribute!r}")
    return target


# Where factories are imported from (set by the job from the config's folder).
_FACTORY_ROOT: list[Path] = []


def set_plugin_root(root: Path) -> None:
    """The folder user modules are imported from (the config file's folder)."""
    _FACTORY_ROOT[:] = [Path(root)]


def _call_factory(spec: ModelSpec) -> nn.Module:
    root = _FACTORY_ROOT[0] if _FACTORY_ROOT else None
    build = resolve_callable(spec.factory or "", "model.factory", root)
    try:
        module = build(list(spec.features), dict(spec.params))
    except DriftgateError:
        raise
    except Exception as exc:
        raise ConfigError(
            f"model.factory {spec.factory!r} raised {type(exc).__name__}: {exc}"
        ) from exc
    if not isinstance(module, nn.Module):
        raise ConfigError(
            f"model.factory {spec.factory!r} returned {type(module).__name__}, "
            "expected a torch.nn.Module"
        )
    return module


def flavour_of_module(model: nn.Module) -> ModelFlavour:
    """The flavour a module belongs to: a user's module is wrapped in a TaskHead."""
    return FLAVOURS[FACTORY if isinstance(model, TaskHead) else BUILTIN]


def expected_shape(spec: ModelSpec, rows: int) -> tuple[int, ...]:
    return (rows, spec.n_outputs) if spec.task == "multiclass" else (rows,)


def output_shape_problem(spec: ModelSpec, output: np.ndarray, rows: int) -> str:
    """Why ``output`` (the task's output for ``rows`` rows) has the wrong shape, or ''."""
    shape = tuple(np.shape(output))
    want = expected_shape(spec, rows)
    if shape == want:
        return ""
    what = f"{spec.n_outputs} classes" if spec.task == "multiclass" else "one output per row"
    return f"output shape {shape} for {rows} rows; a {spec.task} model ({what}) returns {want}"


def check_output_shape(model: nn.Module, spec: ModelSpec, example: np.ndarray) -> None:
    """Raise ModelOutputError (the ``output_shape`` model check) naming the setting."""
    reference = {FACTORY: spec.factory, TRAIN: spec.train}.get(spec.flavour)
    setting = f"{plugin_setting(spec)} {reference!r}" if reference else "built-in model"
    try:
        output = flavour_of(spec).predict(model, example)
    except DriftgateError:
        raise
    except Exception as exc:
        raise ModelOutputError(
            f"model check output_shape failed: {setting} raised on {len(example)} rows: "
            f"{type(exc).__name__}: {exc}"
        ) from exc
    if problem := output_shape_problem(spec, output, len(example)):
        raise ModelOutputError(f"model check output_shape failed: {setting}: {problem}")


def user_training(spec: ModelSpec, root: Path | None = None) -> Callable | None:
    """The user's ``model.train`` function, or None for driftgate's trainer."""
    return resolve_callable(spec.train, "model.train", root) if spec.train else None


def run_user_training(fit: Callable, model: nn.Module | None, data: TrainingData,
                      params: TrainParams) -> nn.Module:  # fmt: skip
    """Call ``fit(module, data, params)`` (``module`` None without a factory: the loop
    builds its own); its module (raw outputs) wrapped as the task's."""
    spec = data.spec
    try:
        trained = fit(model.core if model is not None else None, data, params)
    except DriftgateError:
        raise
    except Exception as exc:
        raise ConfigError(f"model.train {spec.train!r} raised {type(exc).__name__}: {exc}") from exc
    if not isinstance(trained, nn.Module):
        raise ConfigError(
            f"model.train {spec.train!r} returned {type(trained).__name__}, "
            "expected a torch.nn.Module"
        )
    return TaskHead(trained, spec.task).eval()
