"""The allow-list of what driftgate may load: an MLflow PyTorch model in the pt2 format,
or an MLflow ONNX model.

``mlflow.pyfunc.load_model`` imports whatever ``python_function.loader_module`` the
``MLmodel`` file names, and that loader may unpickle any file it is pointed at; torch's
pt2 reader itself unpickles weights marked ``use_pickle`` and falls back to
``torch.load(weights_only=False)`` for sample inputs it cannot read safely. So a model
is judged by its files alone, before any of them is loaded: every file of the folder
must be one this module names, in the format it names, checked by its bytes and not by
its extension. Anything else is refused, whether or not it would have run.

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
  :mod:`driftgate.modelguard.pt2_graph`, weights and constants as raw tensor bytes that their JSON
  configs mark ``use_pickle: false``, and sample inputs as a ``torch.save`` archive whose
  pickle names only tensor-rebuilding globals.

Or, for a model trained elsewhere that is not torch (``driftgate adopt``), the shape
``mlflow.onnx.log_model`` writes (mlflow 3.17): its loader (``mlflow.onnx._load_pyfunc``)
parses the ONNX protobuf and opens an ``onnxruntime.InferenceSession``; nothing in it
unpickles. So:

- ``MLmodel``: exactly the flavours ``onnx`` (``data: model.onnx``, no ``code``,
  providers among the CPU/CUDA ones, only thread/mode/optimisation session options) and
  ``python_function`` (``loader_module: mlflow.onnx``, ``data: model.onnx``, no ``code``);
- beside it the same YAML/JSON/text files as above;
- ``model.onnx``: an ONNX ``ModelProto`` (parsed as protobuf, external data not loaded)
  whose operators are standard ONNX domains or the model's own functions (a custom
  domain needs a native operator library), and whose external tensors name plain files
  of the folder; those files hold raw tensor bytes (no pickle, no zip).

Which rule set applies is read from the ``MLmodel`` (an ``onnx`` flavour: ONNX); each
set refuses the other's flavours, so naming a flavour never widens what loads.

A state dict (``weights/state_dict.pt`` beside ``architecture.json``) is checked the
same way before ``torch.load(weights_only=True)`` reads it: a second lock in case the
restricted unpickler has a hole (it had, before torch 2.6: CVE-2025-32434).

These are plain functions returning findings; :mod:`driftgate.registry` turns them
into its refusal, which every loader goes through.
"""

from __future__ import annotations

import io
import json
import pickletools
import re
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import yaml

from driftgate.modelguard import onnx_graph, pt2_graph

MLMODEL = "MLmodel"
PT2_FILE = "data/model.pt2"
MODEL_DATA = "data"
LOADER_MODULE = "mlflow.pytorch"
PYTORCH_PICKLE_MODULE = "mlflow.pytorch.pickle_module"
ALLOWED_FLAVOURS = ("python_function", "pytorch")
# An MLflow ONNX model (a model trained elsewhere that is not torch).
PT2, ONNX = "pt2", "onnx"
ONNX_FILE = "model.onnx"
ONNX_LOADER_MODULE = "mlflow.onnx"
ONNX_FLAVOURS = ("onnx", "python_function")
_ONNX_KEYS = frozenset({"onnx_version", "data", "providers", "onnx_session_options", "code"})
_ONNX_PROVIDERS = frozenset({"CPUExecutionProvider", "CUDAExecutionProvider"})
_ONNX_SESSION_OPTIONS = frozenset(
    {"inter_op_num_threads", "intra_op_num_threads", "execution_mode", "graph_optimization_level"}
)

# Files beside MLmodel and how each must parse; all are read by MLflow as YAML, JSON or
# text, never unpickled. Nothing else may be in the folder.
_YAML_FILES = ("conda.yaml", "python_env.yaml", "registered_model_meta")
_JSON_FILES = ("input_example.json", "serving_input_example.json")
_TEXT_FILES = ("requirements.txt",)

# MLmodel's top level: what mlflow.models.Model writes. None of it chooses code.
_MLMODEL_KEYS = frozenset(
    {
        "artifact_path",
        "auth_policy",
        "databricks_runtime",
        "env_vars",
        "flavors",
        "is_signature_from_type_hint",
        "metadata",
        "mlflow_version",
        "model_id",
        "model_size_bytes",
        "model_uuid",
        "prompts",
        "resources",
        "run_id",
        "saved_input_example_info",
        "signature",
        "type_hint_from_example",
        "utc_time_created",
    }
)
_PYTORCH_KEYS = frozenset({"model_data", "pytorch_version", "code", "serialization_format"})
_PYFUNC_KEYS = frozenset(
    {"loader_module", "data", "env", "python_version", "pickle_module_name", "config", "code"}
)
# Keys of a pyfunc flavour that load a Python object or code, named in the refusal.
_CODE_KEYS = {
    "python_model": "a cloudpickled Python model",
    "cloudpickle_version": "written beside a cloudpickled Python model",
    "artifacts": "artifacts handed to a Python model",
    "model_code_path": "a model defined by code",
    "code": "a code folder put on sys.path",
}

# libyaml when present, for files only checked for shape: the pure-Python parser costs
# ~20 ms an MLmodel (which is parsed with it anyway, see _inspect_mlmodel).
_YAML_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

# Text files are read whole; a bigger one is not a config or an example.
MAX_TEXT_BYTES = 64 * 1024 * 1024
# Bytes of an unknown file scanned for a pickle stream or a zip signature.
_HEAD_BYTES = 64 * 1024

# torch.save archives (sample inputs, state dicts): the pickle may only name these.
_STORAGE_KINDS = ("Float", "Double", "Half", "BFloat16", "Long", "Int", "Short", "Char", "Byte")
_TENSOR_GLOBALS = frozenset(
    {"collections.OrderedDict", "torch._utils._rebuild_tensor_v2", "torch.BoolStorage"}
    | {f"torch.{kind}Storage" for kind in _STORAGE_KINDS}
)
_TORCH_SAVE_MEMBERS = frozenset(
    {"data.pkl", ".format_version", ".storage_alignment", "byteorder", "version"}
    | {".data/version", ".data/serialization_id"}
)
_TORCH_SAVE_STORAGE = re.compile(r"data/[0-9]+")

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

# Opcodes through which a pickle imports: without one it cannot name code to call.
_IMPORT_OPCODES = frozenset({"GLOBAL", "STACK_GLOBAL", "INST", "EXT1", "EXT2", "EXT4"})
_STRING_OPCODES = frozenset(
    {"STRING", "BINSTRING", "SHORT_BINSTRING", "UNICODE", "SHORT_BINUNICODE", "BINUNICODE"}
    | {"BINUNICODE8"}
)
# Opcodes that store to the memo and leave the stack as it was. GET opcodes are not
# among them: they push a memoised value, maybe a string, that STACK_GLOBAL then takes.
_MEMO_OPCODES = frozenset({"PUT", "BINPUT", "LONG_BINPUT", "MEMOIZE"})


@dataclass(frozen=True)
class Finding:
    """One reason a folder is refused: the file (relative path) and why."""

    file: str
    reason: str
    pickled: bool = False  # the file is, or holds, a pickle stream

    def __str__(self) -> str:
        return f"{self.file}: {self.reason}"


def inspect_model_folder(folder: Path) -> list[Finding]:
    """Every reason the MLflow model in ``folder`` is outside the allow-list; [] if none.

    Reads the files only as bytes, YAML (safe loader), JSON and zip directories: nothing
    in ``folder`` is imported or unpickled.
    """
    folder = Path(folder)
    findings: list[Finding] = []
    files = _files(folder, findings)
    if MLMODEL not in files:
        findings.append(Finding(MLMODEL, "missing: not an MLflow model"))
    if model_format(folder) == ONNX:
        return findings + _inspect_onnx_model(files)
    if PT2_FILE not in files:
        findings.append(Finding(PT2_FILE, "missing: not a PyTorch model in the pt2 format"))
    for name, path in files.items():
        findings += _inspect_file(name, path)
    return findings


def model_format(folder: Path) -> str:
    """``onnx`` when the folder's ``MLmodel`` names an ``onnx`` flavour, else ``pt2``:
    which rule set judges the folder (each refuses the other's flavours)."""
    path = Path(folder) / MLMODEL
    try:
        if path.is_symlink() or not path.is_file() or path.stat().st_size > MAX_TEXT_BYTES:
            return PT2
        flavours = _safe_yaml(path.read_text(encoding="utf-8")).get("flavors")
    except Exception:
        return PT2
    return ONNX if isinstance(flavours, dict) and ONNX in flavours else PT2


def inspect_weights_folder(folder: Path) -> list[Finding]:
    """Reasons the run's ``weights`` folder (``architecture.json`` + ``state_dict.pt``)
    must not reach ``torch.load``; [] if none."""
    folder = Path(folder)
    findings: list[Finding] = []
    files = _files(folder, findings)
    for required in ("architecture.json", "state_dict.pt"):
        if required not in files:
            findings.append(Finding(required, "missing"))
    for name, path in files.items():
        if name == "architecture.json":
            findings += _parse_text(name, path, "json")
        elif name == "state_dict.pt":
            findings += _inspect_torch_save(name, path.read_bytes())
        else:
            findings += _content_findings(name, path) or [
                Finding(name, "not an allowed file of a weights folder")
            ]
    return findings


def pickle_stream(data: bytes, truncated: bool = False) -> str | None:
    """How ``data`` reads as a pickle (for a refusal), or None when it does not.

    A protocol 2+ stream announces itself (``\\x80`` then the protocol). Protocols 0
    and 1 have no header, so the bytes are also walked as opcodes: a stream that
    parses up to STOP (or to the end of a truncated head) through an opcode that
    imports counts, since ``pickle.load`` reads no further than STOP.
    """
    if len(data) >= 2 and data[0] == 0x80 and data[1] <= 5:
        return f"a pickle stream (protocol {data[1]})"
    imports = False
    try:
        for opcode, _, _ in pickletools.genops(data):
            imports = imports or opcode.name in _IMPORT_OPCODES
            if opcode.name == "STOP":
                break
    except ValueError as exc:
        if not (truncated and "exhausted" in str(exc)):
            return None
    except Exception:
        return None
    return "a pickle stream (protocol 0/1 opcodes)" if imports else None


def pickle_globals(data: bytes) -> set[str]:
    """The ``module.name`` globals a pickle stream imports, found without unpickling it.

    Raises ValueError when that cannot be told statically (an extension-registry
    opcode, a STACK_GLOBAL whose operands are not string literals), so callers refuse.
    """
    found: set[str] = set()
    strings: list[str] = []
    for opcode, arg, _ in pickletools.genops(data):
        name = opcode.name
        if name in ("GLOBAL", "INST"):
            module, attribute = str(arg).split(" ", 1)
            found.add(f"{module}.{attribute}")
        elif name == "STACK_GLOBAL":
            if len(strings) < 2:
                raise ValueError("STACK_GLOBAL operands are not string literals")
            found.add(f"{strings[-2]}.{strings[-1]}")
            strings = []
        elif name in ("EXT1", "EXT2", "EXT4"):
            raise ValueError("the copyreg extension registry names globals at load time")
        elif name in _STRING_OPCODES:
            strings.append(str(arg))
        elif name not in _MEMO_OPCODES:
            strings = []
    return found


# -- files -----------------------------------------------------------------------------


def _files(folder: Path, findings: list[Finding]) -> dict[str, Path]:
    """Regular files under ``folder`` by relative POSIX path; anything else is a finding."""
    files: dict[str, Path] = {}
    if not folder.is_dir():
        findings.append(Finding(str(folder), "not a folder"))
        return files
    for path in sorted(folder.rglob("*")):
        name = path.relative_to(folder).as_posix()
        if path.is_symlink():
            findings.append(Finding(name, "a symbolic link (may point outside the model)"))
        elif path.is_file():
            files[name] = path
        elif not path.is_dir():
            findings.append(Finding(name, "not a regular file"))
    return files


def _inspect_file(name: str, path: Path) -> list[Finding]:
    if name == PT2_FILE:
        return _inspect_pt2(name, path)
    if name == MLMODEL:
        return _parse_text(name, path, "yaml") or _inspect_mlmodel(path)
    if name in _YAML_FILES:
        return _parse_text(name, path, "yaml")
    if name in _JSON_FILES:
        return _parse_text(name, path, "json")
    if name in _TEXT_FILES:
        return _parse_text(name, path, "text")
    return _content_findings(name, path) or [
        Finding(name, "not an allowed file of an MLflow PyTorch pt2 model")
    ]


def _content_findings(name: str, path: Path) -> list[Finding]:
    """A pickle stream or a zip archive holding one, judged by the bytes alone."""
    with path.open("rb") as stream:
        head = stream.read(_HEAD_BYTES + 1)
    if head.startswith(b"PK") or zipfile.is_zipfile(path):
        try:
            with zipfile.ZipFile(path) as archive:
                members = archive.namelist()
        except (zipfile.BadZipFile, OSError, ValueError) as exc:
            return [Finding(name, f"a damaged zip archive ({exc})")]
        pickles = [m for m in members if m.endswith(".pkl")]
        if pickles:
            return [Finding(name, f"a zip archive holding a pickle ({pickles[0]})", pickled=True)]
        return [Finding(name, "a zip archive")]
    pickled = pickle_stream(head[:_HEAD_BYTES], truncated=len(head) > _HEAD_BYTES)
    return [Finding(name, pickled, pickled=True)] if pickled else []


def _parse_text(name: str, path: Path, kind: str) -> list[Finding]:
    """``path`` must be UTF-8 text of ``kind`` (yaml: a mapping; json; text)."""
    if path.stat().st_size > MAX_TEXT_BYTES:
        return [Finding(name, f"{path.stat().st_size} bytes: too large for a {kind} file")]
    data = path.read_bytes()
    pickled = pickle_stream(data) if data[:1] == b"\x80" else None
    if pickled:
        return [Finding(name, pickled, pickled=True)]
    try:
        text = data.decode("utf-8")
        if kind == "yaml" and not isinstance(_safe_yaml(text), dict):
            return [Finding(name, "not a YAML mapping")]
        if kind == "json":
            json.loads(text)
    except (UnicodeDecodeError, ValueError, yaml.YAMLError) as exc:
        return _content_findings(name, path) or [
            Finding(name, f"not a {kind} file ({type(exc).__name__})")
        ]
    if "\x00" in text:
        return [Finding(name, f"not a {kind} file (NUL bytes)")]
    return []


def _safe_yaml(text: str):
    """``yaml.safe_load`` with libyaml's safe loader when present."""
    loader = _YAML_LOADER(text)
    try:
        return loader.get_single_data()
    finally:
        loader.dispose()


# -- MLmodel -----------------------------------------------------------------------------


def _inspect_mlmodel(path: Path, kind: str = PT2) -> list[Finding]:
    # Parsed as mlflow.models.Model.load parses it (yaml.safe_load, the pure-Python
    # parser), so that the flavours judged here are the flavours MLflow will act on.
    try:
        meta = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, yaml.YAMLError) as exc:
        return [Finding(MLMODEL, f"not YAML to MLflow's parser ({type(exc).__name__})")]
    if not isinstance(meta, dict):
        return [Finding(MLMODEL, "not a YAML mapping")]
    findings = [
        Finding(MLMODEL, f"unknown top-level key '{key}'")
        for key in sorted(set(meta) - _MLMODEL_KEYS, key=str)
    ]
    flavours = meta.get("flavors")
    if not isinstance(flavours, dict):
        return [*findings, Finding(MLMODEL, "no 'flavors' mapping")]
    allowed = ONNX_FLAVOURS if kind == ONNX else ALLOWED_FLAVOURS
    for flavour in sorted(set(flavours) - set(allowed), key=str):
        findings.append(
            Finding(MLMODEL, f"flavour '{flavour}' is not allowed (only {', '.join(allowed)})")
        )
    checks = (
        (("onnx", _onnx_flavour), ("python_function", _onnx_pyfunc_flavour))
        if kind == ONNX
        else (("pytorch", _pytorch_flavour), ("python_function", _pyfunc_flavour))
    )
    for flavour, check in checks:
        conf = flavours.get(flavour)
        if not isinstance(conf, dict):
            findings.append(Finding(MLMODEL, f"flavour '{flavour}' is missing"))
        else:
            findings += [Finding(MLMODEL, f"{flavour}.{reason}") for reason in check(conf)]
    return findings


def _unknown_keys(conf: dict, allowed: frozenset[str]) -> list[str]:
    return [
        f"{key}: not an allowed key" + (f" ({_CODE_KEYS[key]})" if key in _CODE_KEYS else "")
        for key in sorted(set(conf) - allowed, key=str)
    ]


def _pytorch_flavour(conf: dict) -> list[str]:
    reasons = _unknown_keys(conf, _PYTORCH_KEYS)
    reasons += _expect(conf, "model_data", MODEL_DATA)
    if conf.get("code") is not None:
        reasons.append(f"code: {conf['code']!r} ({_CODE_KEYS['code']})")
    if conf.get("serialization_format", "pt2") != "pt2":
        reasons.append(f"serialization_format: {conf['serialization_format']!r}, not 'pt2'")
    return reasons


def _pyfunc_flavour(conf: dict, loader: str = LOADER_MODULE, data: str = MODEL_DATA) -> list[str]:
    reasons = _unknown_keys(conf, _PYFUNC_KEYS)
    reasons += _expect(conf, "loader_module", loader)
    reasons += _expect(conf, "data", data)
    if "pickle_module_name" in conf:
        reasons += _expect(conf, "pickle_module_name", PYTORCH_PICKLE_MODULE)
    if conf.get("code") is not None:
        reasons.append(f"code: {conf['code']!r} ({_CODE_KEYS['code']})")
    env = conf.get("env", {})
    if not isinstance(env, dict) or any(
        value not in ("conda.yaml", "python_env.yaml") for value in env.values()
    ):
        reasons.append(f"env: {env!r} names files other than conda.yaml / python_env.yaml")
    config = conf.get("config") or {}
    if not isinstance(config, dict) or set(config) - {"device"}:
        reasons.append(f"config: {config!r}; only 'device' may be set")
    elif config.get("device") not in (None, "cpu"):
        reasons.append(f"config.device: {config['device']!r}; only null or 'cpu'")
    return reasons


def _onnx_pyfunc_flavour(conf: dict) -> list[str]:
    reasons = _pyfunc_flavour(conf, ONNX_LOADER_MODULE, ONNX_FILE)
    if "pickle_module_name" in conf:  # mlflow.onnx unpickles nothing: nothing to name
        reasons.append("pickle_module_name: not an allowed key of an ONNX model")
    return reasons


def _onnx_flavour(conf: dict) -> list[str]:
    reasons = _unknown_keys(conf, _ONNX_KEYS)
    reasons += _expect(conf, "data", ONNX_FILE)
    if conf.get("code") is not None:
        reasons.append(f"code: {conf['code']!r} ({_CODE_KEYS['code']})")
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


def _expect(conf: dict, key: str, value: str) -> list[str]:
    found = conf.get(key)
    return [] if found == value else [f"{key}: {found!r}; only {value!r} may load"]


# -- ONNX ------------------------------------------------------------------------------


def _inspect_onnx_model(files: dict[str, Path]) -> list[Finding]:
    """The files of an MLflow ONNX model folder (see the module docstring)."""
    if ONNX_FILE not in files:
        return [Finding(ONNX_FILE, "missing: not an MLflow ONNX model")]
    findings, external = _inspect_onnx(ONNX_FILE, files[ONNX_FILE])
    for name in sorted(external - set(files)):
        findings.append(Finding(name, f"missing: an external tensor file {ONNX_FILE} names"))
    for name, path in files.items():
        if name == ONNX_FILE:
            continue
        if name == MLMODEL:
            findings += _parse_text(name, path, "yaml") or _inspect_mlmodel(path, ONNX)
        elif name in _YAML_FILES or name in _JSON_FILES or name in _TEXT_FILES:
            findings += _inspect_file(name, path)
        elif name in external:
            findings += _content_findings(name, path)  # raw tensor bytes: any bytes are floats
        else:
            findings += _content_findings(name, path) or [
                Finding(name, "not an allowed file of an MLflow ONNX model")
            ]
    return findings


def _inspect_onnx(name: str, path: Path) -> tuple[list[Finding], set[str]]:
    """``model.onnx``: a ModelProto of standard operators; the external files it names."""
    if content := _content_findings(name, path):
        return content, set()
    import onnx

    try:
        model = onnx.load_model(str(path), load_external_data=False)
    except Exception as exc:  # protobuf's DecodeError and friends
        return [Finding(name, f"not an ONNX model ({type(exc).__name__})")], set()
    reasons, external = onnx_graph.model_findings(model)
    findings = [Finding(name, reason) for reason in reasons]
    return findings, external


# -- archives ---------------------------------------------------------------------------


def _members(name: str, archive: zipfile.ZipFile) -> tuple[dict[str, zipfile.ZipInfo], list]:
    """Members by name below the archive's one root folder, and findings about its shape.

    Duplicate names are refused: Python's zipfile reads the last, torch's reader may read
    the first, so the member checked need not be the member loaded.
    """
    findings = []
    infos = [info for info in archive.infolist() if not info.is_dir()]
    names = [info.filename for info in infos]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        findings.append(Finding(name, f"a zip archive with duplicate members ({duplicates[0]})"))
    roots = {n.split("/", 1)[0] for n in names}
    if len(roots) != 1 or any("/" not in n for n in names):
        findings.append(Finding(name, f"not one root folder in the archive ({sorted(roots)})"))
        return {}, findings
    return {info.filename.split("/", 1)[1]: info for info in infos}, findings


def _inspect_pt2(name: str, path: Path) -> list[Finding]:
    """``data/model.pt2``: exactly the members torch.export.save writes, none pickled."""
    with path.open("rb") as stream:
        head = stream.read(_HEAD_BYTES)
    if not head.startswith(b"PK\x03\x04"):
        pickled = pickle_stream(head, truncated=True)
        if pickled:
            return [Finding(name, pickled, pickled=True)]
        return [Finding(name, "not a zip archive, so not torch.export's pt2 format")]
    try:
        with zipfile.ZipFile(path) as archive:
            return _inspect_pt2_members(name, archive)
    except (zipfile.BadZipFile, OSError, ValueError, KeyError) as exc:
        return [Finding(name, f"a damaged zip archive ({exc})")]


def _inspect_pt2_members(name: str, archive: zipfile.ZipFile) -> list[Finding]:
    members, findings = _members(name, archive)
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
            findings += _inspect_torch_save(where, archive.read(info))
        else:
            with archive.open(info) as record:
                data = record.read(_HEAD_BYTES)
            truncated = info.file_size > _HEAD_BYTES
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
    content_findings: Callable[[object], list[str]] | None = None,
) -> list[Finding]:
    """A JSON member of an archive; ``content_findings`` judges what it parsed to."""
    if info.file_size > MAX_TEXT_BYTES:
        return [Finding(where, f"{info.file_size} bytes: too large for JSON")]
    try:
        document = json.loads(archive.read(info).decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        return [Finding(where, f"not JSON ({type(exc).__name__})")]
    if content_findings is None:
        return []
    return [Finding(where, reason) for reason in content_findings(document)]


def _inspect_torch_save(where: str, data: bytes) -> list[Finding]:
    """A ``torch.save`` archive of tensors: its one pickle names tensor globals only."""
    if not data.startswith(b"PK\x03\x04"):
        pickled = pickle_stream(data[:_HEAD_BYTES], truncated=len(data) > _HEAD_BYTES)
        if pickled:
            return [Finding(where, f"{pickled}, not a torch.save archive", pickled=True)]
        return [Finding(where, "not a torch.save (zip) archive")]
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            members, findings = _members(where, archive)
            if "data.pkl" not in members:
                findings.append(Finding(where, "a torch.save archive without data.pkl"))
            for member, info in sorted(members.items()):
                if member == "data.pkl":
                    findings += _tensor_pickle(f"{where}!{member}", archive.read(info))
                elif member not in _TORCH_SAVE_MEMBERS and not _TORCH_SAVE_STORAGE.fullmatch(
                    member
                ):
                    findings.append(
                        Finding(
                            f"{where}!{member}",
                            "not a member of a torch.save archive of tensors",
                            pickled=member.endswith(".pkl"),
                        )
                    )
            return findings
    except (zipfile.BadZipFile, OSError, ValueError) as exc:
        return [Finding(where, f"a damaged zip archive ({exc})")]


def _tensor_pickle(where: str, data: bytes) -> list[Finding]:
    try:
        names = pickle_globals(data)
    except Exception as exc:
        return [Finding(where, f"a pickle that cannot be checked ({exc})", pickled=True)]
    other = sorted(names - _TENSOR_GLOBALS)
    if other:
        return [
            Finding(where, f"a pickle naming {', '.join(other[:3])} (only tensors)", pickled=True)
        ]
    return []


def describe(findings: list[Finding], limit: int = 6) -> str:
    """The findings as one line, pickles first, the first ``limit`` of them."""
    ordered = sorted(findings, key=lambda finding: not finding.pickled)
    shown = "; ".join(str(f) for f in ordered[:limit])
    more = len(findings) - limit
    return shown + (f"; and {more} more" if more > 0 else "")
