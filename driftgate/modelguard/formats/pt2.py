"""``pt2``: an MLflow PyTorch model in torch.export's format, what training logs.

What passes (the shape ``mlflow.pytorch.log_model(..., serialization_format="pt2")``
writes, checked against a real one logged with mlflow 3.17 and torch 2.13):

- ``MLmodel``: exactly the flavours ``pytorch`` (``model_data: data``, no ``code``) and
  ``python_function`` (``loader_module: mlflow.pytorch``, ``data: data``, no ``code``),
  each with only the keys MLflow writes for pt2; no ``python_model``, no cloudpickle;
- beside it only ``conda.yaml``, ``python_env.yaml``, ``requirements.txt``,
  ``registered_model_meta`` (YAML or text) and the input examples (JSON);
- ``data/model.pt2``: a zip archive of exactly torch.export's members: short text
  records, the graph as JSON in which every field torch evaluates or executes (symbolic
  expressions, guards, operator names) is absent or inside the closed grammar of
  :mod:`driftgate.modelguard.pt2_graph`, weights and constants as raw tensor bytes that
  their JSON configs mark ``use_pickle: false``, and sample inputs as a ``torch.save``
  archive whose pickle names only tensor-rebuilding globals.

torch's pt2 reader unpickles weights marked ``use_pickle`` and falls back to
``torch.load(weights_only=False)`` for sample inputs it cannot read safely, hence the
member-by-member check.
"""

from __future__ import annotations

import json
import re
import zipfile
from collections.abc import Callable
from pathlib import Path
from types import MappingProxyType

from driftgate.modelguard import pt2_graph
from driftgate.modelguard.common import (
    HEAD_BYTES,
    MAX_TEXT_BYTES,
    MLMODEL,
    PICKLE_MODULE,
    Finding,
    FlavourCheck,
    archive_members,
    content_findings,
    expect,
    no_code,
    pickle_stream,
    pyfunc_flavour,
    side_file_findings,
    torch_save_findings,
    unknown_keys,
)
from driftgate.modelguard.formats.registry import ModelFormat, register

NAME = "pt2"
PT2_FILE = "data/model.pt2"
MODEL_DATA = "data"
LOADER_MODULE = "mlflow.pytorch"
PYTORCH_PICKLE_MODULE = PICKLE_MODULE  # what mlflow.pytorch names in python_function
_PYTORCH_KEYS = frozenset({"model_data", "pytorch_version", "code", "serialization_format"})

# torch.export's archive (torch/export/pt2_archive/constants.py), below its root folder.
_PT2_TEXT_RECORDS = {
    "archive_format": re.compile(r"pt2"),
    "archive_version": re.compile(r"[0-9]{1,8}\n?"),
    "byteorder": re.compile(r"little|big"),
    ".data/version": re.compile(r"[0-9]{1,8}\n?"),
    ".data/serialization_id": re.compile(r"[0-9A-Za-z]{1,128}"),
}
_PT2_GRAPH = re.compile(r"models/(\w+)\.json")
_PT2_PAYLOAD_CONFIG = re.compile(r"data/(weights|constants)/\w+_\1_config\.json")
_PT2_SAMPLE_INPUTS = re.compile(r"data/sample_inputs/(\w+)\.pt")
# Raw tensor records: read with as_strided when their config says use_pickle: false.
_PT2_RAW_PREFIX = {"weights": "weight_", "constants": "tensor_"}


class Pt2Format(ModelFormat):
    name = NAME
    description = "an MLflow PyTorch pt2 model"
    marker = "pytorch"
    loader_module = LOADER_MODULE
    data = MODEL_DATA
    claim_order = 20  # after onnx (see onnx.py)
    runtime_versions = MappingProxyType({"torch": ("pytorch", "pytorch_version")})
    # What training logs and what MLflow users log most: a folder no format claims (a
    # pickled scikit-learn model, a cloudpickled pyfunc) is told what it lacks to be one.
    judges_unclaimed = True
    how_to_log = "a PyTorch model with mlflow.pytorch.log_model (pt2, the default)"

    def flavour_checks(self) -> dict[str, FlavourCheck]:
        return {"pytorch": pytorch_flavour, "python_function": _pyfunc}

    def inspect_files(self, files: dict[str, Path]) -> list[Finding]:
        findings = []
        if PT2_FILE not in files:
            findings.append(Finding(PT2_FILE, "missing: not a PyTorch model in the pt2 format"))
        for name, path in files.items():
            findings += self._inspect_file(name, path)
        return findings

    def _inspect_file(self, name: str, path: Path) -> list[Finding]:
        if name == PT2_FILE:
            return inspect_pt2(name, path)
        if name == MLMODEL:
            return self.mlmodel_findings(name, path)
        side = side_file_findings(name, path)
        if side is not None:
            return side
        return content_findings(name, path) or [
            Finding(name, f"not an allowed file of {self.description}")
        ]


def pytorch_flavour(conf: dict) -> list[str]:
    reasons = unknown_keys(conf, _PYTORCH_KEYS)
    reasons += expect(conf, "model_data", MODEL_DATA)
    reasons += no_code(conf)
    if conf.get("serialization_format", "pt2") != "pt2":
        reasons.append(f"serialization_format: {conf['serialization_format']!r}, not 'pt2'")
    return reasons


def _pyfunc(conf: dict) -> list[str]:
    return pyfunc_flavour(conf, LOADER_MODULE, MODEL_DATA)


# -- the archive --------------------------------------------------------------------------


def inspect_pt2(name: str, path: Path) -> list[Finding]:
    """``data/model.pt2``: exactly the members torch.export.save writes, none pickled."""
    with path.open("rb") as stream:
        head = stream.read(HEAD_BYTES)
    if not head.startswith(b"PK\x03\x04"):
        pickled = pickle_stream(head, truncated=True)
        if pickled:
            return [Finding(name, pickled, pickled=True)]
        return [Finding(name, "not a zip archive, so not torch.export's pt2 format")]
    try:
        with zipfile.ZipFile(path) as archive:
            return inspect_pt2_members(name, archive)
    except (zipfile.BadZipFile, OSError, ValueError, KeyError) as exc:
        return [Finding(name, f"a damaged zip archive ({exc})")]


def inspect_pt2_members(name: str, archive: zipfile.ZipFile) -> list[Finding]:
    members, findings = archive_members(name, archive)
    raw_records: set[str] = set()
    for member, info in members.items():
        if (config := _PT2_PAYLOAD_CONFIG.fullmatch(member)) is None:
            continue
        kind = config.group(1)
        reasons, raw = _payload_config(archive.read(info), kind)
        findings += [Finding(f"{name}!{member}", reason) for reason in reasons]
        raw_records |= {f"data/{kind}/{record}" for record in raw}
    for member, info in sorted(members.items()):
        where = f"{name}!{member}"
        if member in raw_records:
            continue  # raw tensor bytes: never unpickled, and any bytes are valid floats
        if member in _PT2_TEXT_RECORDS:
            with archive.open(info) as record:
                text = record.read(256).decode("ascii", errors="replace")
            if info.file_size > 256 or not _PT2_TEXT_RECORDS[member].fullmatch(text):
                findings.append(Finding(where, f"unexpected content {text[:40]!r}"))
        elif _PT2_GRAPH.fullmatch(member):
            findings += _json_member(where, archive, info, pt2_graph.graph_findings)
        elif _PT2_PAYLOAD_CONFIG.fullmatch(member):
            findings += _json_member(where, archive, info)
        elif _PT2_SAMPLE_INPUTS.fullmatch(member):
            findings += torch_save_findings(where, archive.read(info))
        else:
            with archive.open(info) as record:
                data = record.read(HEAD_BYTES)
            truncated = info.file_size > HEAD_BYTES
            pickled = member.endswith(".pkl") or pickle_stream(data, truncated=truncated)
            reason = "not a member of torch.export's pt2 archive"
            if pickled:
                reason += f" ({pickled if isinstance(pickled, str) else 'a pickle'})"
            elif member.startswith("data/weights/") or member.startswith("data/constants/"):
                reason += " (not a raw tensor record with use_pickle: false)"
            findings.append(Finding(where, reason, pickled=bool(pickled)))
    return findings


def _payload_config(data: bytes, kind: str) -> tuple[list[str], set[str]]:
    """Reasons a weights/constants config is refused, and the raw records it lists."""
    try:
        entries = json.loads(data.decode("utf-8"))["config"]
        assert isinstance(entries, dict)
    except (UnicodeDecodeError, ValueError, KeyError, TypeError, AssertionError):
        return ["not a payload config ({'config': {...}})"], set()
    reasons, raw = [], set()
    for fqn, entry in entries.items():
        path_name = entry.get("path_name") if isinstance(entry, dict) else None
        if not isinstance(path_name, str) or "/" in path_name:
            reasons.append(f"{fqn}: no plain path_name")
        elif entry.get("use_pickle") is not False:
            reasons.append(f"{fqn}: use_pickle is {entry.get('use_pickle')!r} ({path_name})")
        elif not path_name.startswith(_PT2_RAW_PREFIX[kind]):
            reasons.append(f"{fqn}: {path_name} is not a raw tensor record (unpickled)")
        else:
            raw.add(path_name)
    return reasons, raw


def _json_member(
    where: str,
    archive: zipfile.ZipFile,
    info: zipfile.ZipInfo,
    judge: Callable[[object], list[str]] | None = None,
) -> list[Finding]:
    """A JSON member of an archive; ``judge`` gives the reasons what it parsed to is
    refused."""
    if info.file_size > MAX_TEXT_BYTES:
        return [Finding(where, f"{info.file_size} bytes: too large for JSON")]
    try:
        document = json.loads(archive.read(info).decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        return [Finding(where, f"not JSON ({type(exc).__name__})")]
    if judge is None:
        return []
    return [Finding(where, reason) for reason in judge(document)]


PT2 = register(Pt2Format())
