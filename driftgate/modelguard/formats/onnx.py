"""``onnx``: an MLflow ONNX model, for a model trained elsewhere that is not torch
(``driftgate adopt``).

The shape ``mlflow.onnx.log_model`` writes (mlflow 3.17): its loader
(``mlflow.onnx._load_pyfunc``) parses the ONNX protobuf and opens an
``onnxruntime.InferenceSession``; nothing in it unpickles. So:

- ``MLmodel``: exactly the flavours ``onnx`` (``data: model.onnx``, no ``code``,
  providers among the CPU/CUDA ones, only thread/mode/optimisation session options) and
  ``python_function`` (``loader_module: mlflow.onnx``, ``data: model.onnx``, no ``code``);
- beside it the same YAML/JSON/text files as a pt2 model;
- ``model.onnx``: an ONNX ``ModelProto`` (parsed as protobuf, external data not loaded)
  whose operators are standard ONNX domains or the model's own functions (a custom
  domain needs a native operator library), and whose external tensors name plain files
  of the folder (:mod:`driftgate.modelguard.onnx_graph`); those files hold raw tensor
  bytes (no pickle, no zip).
"""

from __future__ import annotations

from pathlib import Path
from types import MappingProxyType

from driftgate.modelguard import onnx_graph
from driftgate.modelguard.common import (
    MLMODEL,
    Finding,
    FlavourCheck,
    content_findings,
    expect,
    no_code,
    pyfunc_flavour,
    side_file_findings,
    unknown_keys,
)
from driftgate.modelguard.formats.registry import ModelFormat, register

NAME = "onnx"
ONNX_FILE = "model.onnx"
LOADER_MODULE = "mlflow.onnx"
_ONNX_KEYS = frozenset({"onnx_version", "data", "providers", "onnx_session_options", "code"})
_ONNX_PROVIDERS = frozenset({"CPUExecutionProvider", "CUDAExecutionProvider"})
_ONNX_SESSION_OPTIONS = frozenset(
    {"inter_op_num_threads", "intra_op_num_threads", "execution_mode", "graph_optimization_level"}
)


class OnnxFormat(ModelFormat):
    name = NAME
    description = "an MLflow ONNX model"
    marker = "onnx"
    loader_module = LOADER_MODULE
    data = ONNX_FILE
    # Before pt2: an MLmodel naming both onnx and pytorch is judged by these rules, which
    # refuse the pytorch flavour (as before formats were modules).
    claim_order = 10
    # mlflow.onnx's pyfunc answers {output name: array} for an array input.
    outputs_by_name = True
    runs_on_torch = False
    runtime_versions = MappingProxyType({"onnx": ("onnx", "onnx_version")})
    how_to_log = (
        "any other model as ONNX with mlflow.onnx.log_model (e.g. skl2onnx for scikit-learn)"
    )

    def flavour_checks(self) -> dict[str, FlavourCheck]:
        return {"onnx": onnx_flavour, "python_function": _pyfunc}

    def inspect_files(self, files: dict[str, Path]) -> list[Finding]:
        if ONNX_FILE not in files:
            return [Finding(ONNX_FILE, f"missing: not {self.description}")]
        findings, external = inspect_onnx(ONNX_FILE, files[ONNX_FILE])
        for name in sorted(external - set(files)):
            findings.append(Finding(name, f"missing: an external tensor file {ONNX_FILE} names"))
        for name, path in files.items():
            if name == ONNX_FILE:
                continue
            if name == MLMODEL:
                findings += self.mlmodel_findings(name, path)
            elif (side := side_file_findings(name, path)) is not None:
                findings += side
            elif name in external:
                findings += content_findings(name, path)  # raw tensor bytes: any bytes are floats
            else:
                findings += content_findings(name, path) or [
                    Finding(name, f"not an allowed file of {self.description}")
                ]
        return findings


def _pyfunc(conf: dict) -> list[str]:
    # mlflow.onnx unpickles nothing: there is no pickle module for it to name.
    return pyfunc_flavour(conf, LOADER_MODULE, ONNX_FILE, refuses_pickle_module="an ONNX model")


def onnx_flavour(conf: dict) -> list[str]:
    reasons = unknown_keys(conf, _ONNX_KEYS)
    reasons += expect(conf, "data", ONNX_FILE)
    reasons += no_code(conf)
    providers = conf.get("providers")
    if providers is not None and (
        not isinstance(providers, list)
        or not all(isinstance(p, str) and p in _ONNX_PROVIDERS for p in providers)
    ):
        reasons.append(f"providers: {providers!r}; only {sorted(_ONNX_PROVIDERS)}")
    options = conf.get("onnx_session_options")
    if options is not None and (
        not isinstance(options, dict)
        or set(options) - _ONNX_SESSION_OPTIONS
        or not all(isinstance(v, (int, str)) for v in options.values())
    ):
        reasons.append(f"onnx_session_options: {options!r}; only {sorted(_ONNX_SESSION_OPTIONS)}")
    return reasons


def inspect_onnx(name: str, path: Path) -> tuple[list[Finding], set[str]]:
    """``model.onnx``: a ModelProto of standard operators; the external files it names."""
    if content := content_findings(name, path):
        return content, set()
    import onnx

    try:
        model = onnx.load_model(str(path), load_external_data=False)
    except Exception as exc:  # protobuf's DecodeError and friends
        return [Finding(name, f"not an ONNX model ({type(exc).__name__})")], set()
    reasons, external = onnx_graph.model_findings(model)
    findings = [Finding(name, reason) for reason in reasons]
    return findings, external


ONNX = register(OnnxFormat())
