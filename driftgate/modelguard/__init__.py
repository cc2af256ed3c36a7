"""The allow-list of what driftgate may load: a model in one of the formats of
:mod:`driftgate.modelguard.formats` (an MLflow PyTorch model in the pt2 format, or an
MLflow ONNX model), and a torch state dict.

``mlflow.pyfunc.load_model`` imports whatever ``python_function.loader_module`` the
``MLmodel`` file names, and that loader may unpickle any file it is pointed at; torch's
pt2 reader itself unpickles weights marked ``use_pickle`` and falls back to
``torch.load(weights_only=False)`` for sample inputs it cannot read safely. So a model
is judged by its files alone, before any of them is loaded: every file of the folder
must be one its format names, in the form it names, checked by its bytes and not by
its extension. Anything else is refused, whether or not it would have run.

Which format's rules apply is read from the ``MLmodel``: the format whose flavour it
names (``pytorch``: pt2, ``onnx``: ONNX; :func:`format_of`). Each format refuses every
flavour but its own two, so naming another flavour never widens what loads, and a
folder no format claims is refused, naming the formats there are (and judged by the
pt2 rules too, which say what it lacks). The formats are a
closed list, one module each in :mod:`driftgate.modelguard.formats` (what each admits
is in its module's docstring): a format is a security decision, reviewed code there,
never a plugin.

A state dict (``weights/state_dict.pt`` beside ``architecture.json``) is checked the
same way before ``torch.load(weights_only=True)`` reads it: a second lock in case the
restricted unpickler has a hole (it had, before torch 2.6: CVE-2025-32434).

These are plain functions returning findings; :mod:`driftgate.registry` turns them
into its refusal, which every loader goes through.
"""

from __future__ import annotations

from pathlib import Path

from driftgate.modelguard import formats
from driftgate.modelguard.common import (
    MAX_TEXT_BYTES,
    MLMODEL,
    Finding,
    content_findings,
    describe,
    files_of,
    mlmodel_flavours,
    parse_text,
    pickle_globals,
    pickle_stream,
    torch_save_findings,
)
from driftgate.modelguard.formats import ModelFormat
from driftgate.modelguard.formats import onnx as _onnx
from driftgate.modelguard.formats import pt2 as _pt2

# The names other modules (and users' scripts) import from here, kept as they were
# when the two formats were branches of this module.
PT2, ONNX = _pt2.NAME, _onnx.NAME
PT2_FILE = _pt2.PT2_FILE
MODEL_DATA = _pt2.MODEL_DATA
LOADER_MODULE = _pt2.LOADER_MODULE
PYTORCH_PICKLE_MODULE = _pt2.PYTORCH_PICKLE_MODULE
ALLOWED_FLAVOURS = _pt2.PT2.flavours
ONNX_FILE = _onnx.ONNX_FILE
ONNX_LOADER_MODULE = _onnx.LOADER_MODULE
ONNX_FLAVOURS = _onnx.ONNX.flavours

__all__ = [
    "ALLOWED_FLAVOURS",
    "LOADER_MODULE",
    "MAX_TEXT_BYTES",
    "MLMODEL",
    "MODEL_DATA",
    "ONNX",
    "ONNX_FILE",
    "ONNX_FLAVOURS",
    "ONNX_LOADER_MODULE",
    "PT2",
    "PT2_FILE",
    "PYTORCH_PICKLE_MODULE",
    "Finding",
    "ModelFormat",
    "describe",
    "format_of",
    "formats",
    "inspect_model_folder",
    "inspect_weights_folder",
    "model_format",
    "pickle_globals",
    "pickle_stream",
]


def inspect_model_folder(folder: Path) -> list[Finding]:
    """Every reason the MLflow model in ``folder`` is outside the allow-list; [] if none.

    Reads the files only as bytes, YAML (safe loader), JSON and zip directories: nothing
    in ``folder`` is imported or unpickled.
    """
    folder = Path(folder)
    findings: list[Finding] = []
    files = files_of(folder, findings)
    if MLMODEL not in files:
        findings.append(Finding(MLMODEL, "missing: not an MLflow model"))
    flavours = mlmodel_flavours(folder)
    claimed = formats.format_claiming(flavours)
    if claimed is None:
        return findings + formats.unclaimed_findings(files, flavours)
    return findings + claimed.inspect_files(files)


def format_of(folder: Path) -> ModelFormat | None:
    """The format whose rules judge ``folder``: the one its ``MLmodel`` names the
    flavour of; None when no format claims it (the folder is refused)."""
    return formats.format_claiming(mlmodel_flavours(folder))


def model_format(folder: Path) -> str | None:
    """The name of :func:`format_of` ``folder`` (``pt2``, ``onnx``), None if unclaimed."""
    claimed = format_of(folder)
    return claimed.name if claimed is not None else None


def inspect_weights_folder(folder: Path) -> list[Finding]:
    """Reasons the run's ``weights`` folder (``architecture.json`` + ``state_dict.pt``)
    must not reach ``torch.load``; [] if none."""
    folder = Path(folder)
    findings: list[Finding] = []
    files = files_of(folder, findings)
    for required in ("architecture.json", "state_dict.pt"):
        if required not in files:
            findings.append(Finding(required, "missing"))
    for name, path in files.items():
        if name == "architecture.json":
            findings += parse_text(name, path, "json")
        elif name == "state_dict.pt":
            findings += torch_save_findings(name, path.read_bytes())
        else:
            findings += content_findings(name, path) or [
                Finding(name, "not an allowed file of a weights folder")
            ]
    return findings
