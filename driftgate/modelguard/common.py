"""What every model format's rules share: findings, the walk of a folder, the bytes
checks (a pickle stream or a zip holding one, by content and not by name), the text
files beside ``MLmodel``, the ``MLmodel`` file's own shape, and ``torch.save``
archives of tensors.

The format modules (:mod:`driftgate.modelguard.formats`) and the package's
``__init__`` import this module, never each other: the shared parts live here so that
no format module needs the package that lists the formats (no import cycle).
Everything here reads bytes, YAML (safe loader), JSON and zip directories: nothing is
imported or unpickled.
"""

from __future__ import annotations

import io
import json
import pickletools
import re
import zipfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

import yaml

MLMODEL = "MLmodel"

# Files beside MLmodel and how each must parse; all are read by MLflow as YAML, JSON or
# text, never unpickled. Nothing else may be in the folder but what a format names.
YAML_FILES = ("conda.yaml", "python_env.yaml", "registered_model_meta")
JSON_FILES = ("input_example.json", "serving_input_example.json")
TEXT_FILES = ("requirements.txt",)

# MLmodel's top level: what mlflow.models.Model writes. None of it chooses code.
MLMODEL_KEYS = frozenset(
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
# The one pickle module a python_function flavour may name: what mlflow.pytorch writes.
PICKLE_MODULE = "mlflow.pytorch.pickle_module"
PYFUNC_KEYS = frozenset(
    {"loader_module", "data", "env", "python_version", "pickle_module_name", "config", "code"}
)
# Keys of a pyfunc flavour that load a Python object or code, named in the refusal.
CODE_KEYS = {
    "python_model": "a cloudpickled Python model",
    "cloudpickle_version": "written beside a cloudpickled Python model",
    "artifacts": "artifacts handed to a Python model",
    "model_code_path": "a model defined by code",
    "code": "a code folder put on sys.path",
}

# libyaml when present, for files only checked for shape: the pure-Python parser costs
# ~20 ms an MLmodel (which is parsed with it anyway, see mlmodel_findings).
_YAML_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

# Text files are read whole; a bigger one is not a config or an example.
MAX_TEXT_BYTES = 64 * 1024 * 1024
# Bytes of an unknown file scanned for a pickle stream or a zip signature.
HEAD_BYTES = 64 * 1024

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

# Opcodes through which a pickle imports: without one it cannot name code to call.
_IMPORT_OPCODES = frozenset({"GLOBAL", "STACK_GLOBAL", "INST", "EXT1", "EXT2", "EXT4"})
_STRING_OPCODES = frozenset(
    {"STRING", "BINSTRING", "SHORT_BINSTRING", "UNICODE", "SHORT_BINUNICODE", "BINUNICODE"}
    | {"BINUNICODE8"}
)
# Opcodes that store to the memo and leave the stack as it was. GET opcodes are not
# among them: they push a memoised value, maybe a string, that STACK_GLOBAL then takes.
_MEMO_OPCODES = frozenset({"PUT", "BINPUT", "LONG_BINPUT", "MEMOIZE"})

# A flavour's rules: the reasons (``key: why``) its MLmodel entry is refused.
FlavourCheck = Callable[[dict], list[str]]


@dataclass(frozen=True)
class Finding:
    """One reason a folder is refused: the file (relative path) and why."""

    file: str
    reason: str
    pickled: bool = False  # the file is, or holds, a pickle stream

    def __str__(self) -> str:
        return f"{self.file}: {self.reason}"


def describe(findings: list[Finding], limit: int = 6) -> str:
    """The findings as one line, pickles first, the first ``limit`` of them."""
    ordered = sorted(findings, key=lambda finding: not finding.pickled)
    shown = "; ".join(str(f) for f in ordered[:limit])
    more = len(findings) - limit
    return shown + (f"; and {more} more" if more > 0 else "")


# -- pickles ---------------------------------------------------------------------------


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


def files_of(folder: Path, findings: list[Finding]) -> dict[str, Path]:
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


def side_file_findings(name: str, path: Path) -> list[Finding] | None:
    """A YAML, JSON or text file MLflow writes beside ``MLmodel``, checked for its
    kind; None when ``name`` is not one of them (the format decides)."""
    if name in YAML_FILES:
        return parse_text(name, path, "yaml")
    if name in JSON_FILES:
        return parse_text(name, path, "json")
    if name in TEXT_FILES:
        return parse_text(name, path, "text")
    return None


def content_findings(name: str, path: Path) -> list[Finding]:
    """A pickle stream or a zip archive holding one, judged by the bytes alone."""
    with path.open("rb") as stream:
        head = stream.read(HEAD_BYTES + 1)
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
    pickled = pickle_stream(head[:HEAD_BYTES], truncated=len(head) > HEAD_BYTES)
    return [Finding(name, pickled, pickled=True)] if pickled else []


def parse_text(name: str, path: Path, kind: str) -> list[Finding]:
    """``path`` must be UTF-8 text of ``kind`` (yaml: a mapping; json; text)."""
    if path.stat().st_size > MAX_TEXT_BYTES:
        return [Finding(name, f"{path.stat().st_size} bytes: too large for a {kind} file")]
    data = path.read_bytes()
    pickled = pickle_stream(data) if data[:1] == b"\x80" else None
    if pickled:
        return [Finding(name, pickled, pickled=True)]
    try:
        text = data.decode("utf-8")
        if kind == "yaml" and not isinstance(safe_yaml(text), dict):
            return [Finding(name, "not a YAML mapping")]
        if kind == "json":
            json.loads(text)
    except (UnicodeDecodeError, ValueError, yaml.YAMLError) as exc:
        return content_findings(name, path) or [
            Finding(name, f"not a {kind} file ({type(exc).__name__})")
        ]
    if "\x00" in text:
        return [Finding(name, f"not a {kind} file (NUL bytes)")]
    return []


def safe_yaml(text: str):
    """``yaml.safe_load`` with libyaml's safe loader when present."""
    loader = _YAML_LOADER(text)
    try:
        return loader.get_single_data()
    finally:
        loader.dispose()


def mlmodel_flavours(folder: Path) -> dict | None:
    """The ``flavors`` mapping of ``folder``'s ``MLmodel``, or None when there is no
    readable one (a symbolic link, too large, not YAML, no mapping): what a format is
    recognised by. Only recognition: the file is judged in full by the format's rules."""
    path = Path(folder) / MLMODEL
    try:
        if path.is_symlink() or not path.is_file() or path.stat().st_size > MAX_TEXT_BYTES:
            return None
        flavours = safe_yaml(path.read_text(encoding="utf-8")).get("flavors")
    except Exception:
        return None
    return flavours if isinstance(flavours, dict) else None


# -- MLmodel -----------------------------------------------------------------------------


def mlmodel_findings(path: Path, checks: Mapping[str, FlavourCheck]) -> list[Finding]:
    """``MLmodel``: MLflow's top-level keys only, exactly the flavours of ``checks``
    (each present and passing its check, in the order given), no other flavour."""
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
        for key in sorted(set(meta) - MLMODEL_KEYS, key=str)
    ]
    flavours = meta.get("flavors")
    if not isinstance(flavours, dict):
        return [*findings, Finding(MLMODEL, "no 'flavors' mapping")]
    allowed = sorted(checks)
    for flavour in sorted(set(flavours) - set(allowed), key=str):
        findings.append(
            Finding(MLMODEL, f"flavour '{flavour}' is not allowed (only {', '.join(allowed)})")
        )
    for flavour, check in checks.items():
        conf = flavours.get(flavour)
        if not isinstance(conf, dict):
            findings.append(Finding(MLMODEL, f"flavour '{flavour}' is missing"))
        else:
            findings += [Finding(MLMODEL, f"{flavour}.{reason}") for reason in check(conf)]
    return findings


def unknown_keys(conf: dict, allowed: frozenset[str]) -> list[str]:
    return [
        f"{key}: not an allowed key" + (f" ({CODE_KEYS[key]})" if key in CODE_KEYS else "")
        for key in sorted(set(conf) - allowed, key=str)
    ]


def expect(conf: dict, key: str, value: str) -> list[str]:
    found = conf.get(key)
    return [] if found == value else [f"{key}: {found!r}; only {value!r} may load"]


def no_code(conf: dict) -> list[str]:
    """A flavour's ``code``: a folder MLflow puts on sys.path; only null is allowed."""
    return [f"code: {conf['code']!r} ({CODE_KEYS['code']})"] if conf.get("code") is not None else []


def pyfunc_flavour(
    conf: dict, loader: str, data: str, refuses_pickle_module: str = ""
) -> list[str]:
    """``python_function``: the format's loader module reading the format's data, no
    code, the environment files only, at most ``config.device: cpu``; a
    ``pickle_module_name`` only MLflow's own for torch. A format whose loader unpickles
    nothing refuses that key too, naming itself in ``refuses_pickle_module``."""
    reasons = unknown_keys(conf, PYFUNC_KEYS)
    reasons += expect(conf, "loader_module", loader)
    reasons += expect(conf, "data", data)
    if "pickle_module_name" in conf:
        reasons += expect(conf, "pickle_module_name", PICKLE_MODULE)
    reasons += no_code(conf)
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
    if "pickle_module_name" in conf and refuses_pickle_module:
        reasons.append(f"pickle_module_name: not an allowed key of {refuses_pickle_module}")
    return reasons


# -- torch.save archives ------------------------------------------------------------------


def archive_members(
    name: str, archive: zipfile.ZipFile
) -> tuple[dict[str, zipfile.ZipInfo], list[Finding]]:
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


def torch_save_findings(where: str, data: bytes) -> list[Finding]:
    """A ``torch.save`` archive of tensors: its one pickle names tensor globals only."""
    if not data.startswith(b"PK\x03\x04"):
        pickled = pickle_stream(data[:HEAD_BYTES], truncated=len(data) > HEAD_BYTES)
        if pickled:
            return [Finding(where, f"{pickled}, not a torch.save archive", pickled=True)]
        return [Finding(where, "not a torch.save (zip) archive")]
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            members, findings = archive_members(where, archive)
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
