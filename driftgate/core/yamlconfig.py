"""Load YAML into pydantic models with errors that name the file and the key.

Every configuration file of driftgate (project config, params, gates, contracts) goes
through :func:`load_yaml_model`, so a typo anywhere reads the same way:
``driftgate.yaml: train.lr: Input should be a valid number``.

Whatever the bytes of a file, loading either succeeds or raises :class:`ConfigError`
naming the file: unreadable files, bytes that are not UTF-8, YAML syntax errors,
values PyYAML cannot build (an integer of more than 4,300 digits, a date such as
2021-02-30), nesting deep enough to exhaust Python's recursion limit, text holding a
NUL character or an unpaired surrogate (neither can be a path, a name or a URL), and
everything pydantic refuses.

Loading is bounded, whoever wrote the file: a file over :data:`MAX_CONFIG_BYTES` is
refused before it is read (PyYAML's pure-Python parser held 3.6 GB after 150 s on a
50 MB file), and aliases may not expand the document by more than
:data:`MAX_ALIAS_EXPANSION` nodes (a few KB of nested anchors, "billion laughs",
expand to billions of values when the document is validated).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ConfigDict, ValidationError

from driftgate.core.errors import EXIT_USAGE, DriftgateError

Model = TypeVar("Model", bound=BaseModel)

# The committed files are 0.7-3.5 KB (driftgate.yaml, params.yaml, gates.yaml, the
# rainfall contract with 11 columns); 1 MiB holds a contract of about 4,000 columns.
MAX_CONFIG_BYTES = 1024 * 1024
# Nodes that aliases may add to a document beyond its own: room for shared monitor
# settings, none for a document whose anchors nest to exponential size.
MAX_ALIAS_EXPANSION = 100_000


class ConfigError(DriftgateError, ValueError):
    """A configuration file that is missing, unreadable or invalid (exit code 2)."""

    exit_code = EXIT_USAGE


class StrictModel(BaseModel):
    """Base of every configuration model: unknown keys and non-finite numbers refused
    (a ``.nan`` threshold would never breach)."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)


def format_validation_error(path: Path | str, error: ValidationError) -> str:
    """One line per problem: ``FILE: dotted.key: message``."""
    lines = []
    for problem in error.errors():
        key = ".".join(str(part) for part in problem["loc"]) or "(top level)"
        message = problem["msg"]
        if problem["type"] == "extra_forbidden":
            message = "unknown key"
        lines.append(f"{path}: {key}: {message}")
    return "\n".join(lines)


def _size(nbytes: int) -> str:
    return f"{nbytes / 1024 / 1024:.1f} MiB" if nbytes >= 1024 * 1024 else f"{nbytes:,} bytes"


def _expanded_nodes(root: yaml.Node) -> tuple[int, int]:
    """(distinct nodes, nodes once every alias is expanded) of a composed document.

    Iterative, and memoised per node, so a document whose expansion is astronomically
    large is measured in time proportional to its own size.
    """
    expanded: dict[int, int] = {}
    on_path: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, children_done = stack.pop()
        key = id(node)
        if children_done:
            on_path.discard(key)
            children = _children(node)
            expanded[key] = 1 + sum(expanded[id(child)] for child in children)
            continue
        if key in expanded:
            continue
        if key in on_path:
            raise _RecursiveAlias
        on_path.add(key)
        stack.append((node, True))
        stack.extend((child, False) for child in _children(node) if id(child) not in expanded)
    return len(expanded), expanded[id(root)]


class _RecursiveAlias(Exception):
    pass


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    return []


def _compose_bounded(text: str, source: Path | str) -> Any:
    """``yaml.safe_load(text)`` with the aliases' expansion measured before a value is
    built, so a "billion laughs" document is refused in milliseconds."""
    loader = yaml.SafeLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        try:
            own, expanded = _expanded_nodes(node)
        except _RecursiveAlias:
            raise ConfigError(f"{source}: not valid YAML: an alias refers to itself") from None
        if expanded - own > MAX_ALIAS_EXPANSION:
            raise ConfigError(
                f"{source}: not valid YAML: aliases expand {own:,} nodes to {expanded:,} "
                f"(at most {MAX_ALIAS_EXPANSION:,} more are allowed)"
            )
        return loader.construct_document(node)
    finally:
        loader.dispose()


def parse_yaml(text: str, source: Path | str, max_bytes: int = MAX_CONFIG_BYTES) -> Any:
    """``yaml.safe_load(text)``, every failure a ConfigError naming ``source``; text over
    ``max_bytes`` characters or aliases expanding too far are refused."""
    if len(text) > max_bytes:
        raise ConfigError(
            f"{source}: too large: {_size(len(text))} of text, over the "
            f"{_size(max_bytes)} limit for a configuration file"
        )
    try:
        return _compose_bounded(text, source)
    except ConfigError:
        raise
    except yaml.YAMLError as exc:
        raise ConfigError(f"{source}: not valid YAML: {exc}") from exc
    except RecursionError:
        raise ConfigError(f"{source}: not valid YAML: nested too deeply") from None
    except ValueError as exc:
        # Raised by PyYAML's constructors, not wrapped in YAMLError: an int literal past
        # Python's digit limit, an impossible date (2021-02-30, year 0).
        raise ConfigError(f"{source}: not valid YAML: a value cannot be read: {exc}") from None


def missing_file(path: Path) -> str | None:
    """Why ``path`` is not a file to read ("file not found", or the OS's reason), or None."""
    try:
        return None if path.is_file() else "file not found"
    except OSError as exc:  # a name too long for the file system, a parent not searchable
        return f"not a usable path ({exc.strerror or exc})"


def unusable_path(path: Path) -> str | None:
    """Why ``path`` can never be a file or folder here (a name too long for the file
    system, a parent not searchable), or None; a path that does not exist yet is usable."""
    try:
        path.stat()
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as exc:
        return f"not a usable path ({exc.strerror or exc})"
    return None


def _read_bounded(path: Path, max_bytes: int) -> bytes:
    """The bytes of ``path``, refused (ConfigError) past ``max_bytes``: by its size
    before reading, and by what is read (a file that grows meanwhile)."""
    too_large = f"over the {_size(max_bytes)} limit for a configuration file"
    try:
        size = path.stat().st_size
        if size > max_bytes:
            raise ConfigError(f"{path}: too large: {_size(size)}, {too_large}")
        with path.open("rb") as file:
            content = file.read(max_bytes + 1)
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror or exc}") from exc
    if len(content) > max_bytes:
        raise ConfigError(f"{path}: too large: grew while read, {too_large}")
    return content


def read_yaml_mapping(path: Path, max_bytes: int = MAX_CONFIG_BYTES) -> dict:
    """Parse ``path`` as a YAML mapping (an empty file is an empty mapping); a file over
    ``max_bytes`` is refused before it is read."""
    problem = missing_file(path)
    if problem:
        raise ConfigError(f"{path}: {problem}")
    try:
        text = _read_bounded(path, max_bytes).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not valid YAML: {exc}") from exc
    data = parse_yaml(text, path, max_bytes)
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping of keys at the top level")
    return data


def _strings(data: Any) -> Iterator[tuple[tuple, str]]:
    """Every string key and value of nested dicts/lists with its location (iterative:
    a deep document cannot exhaust the stack here)."""
    stack: list[tuple[tuple, Any]] = [((), data)]
    seen: set[int] = set()
    while stack:
        location, value = stack.pop()
        if isinstance(value, str):
            yield location, value
        elif isinstance(value, bytes):  # !!binary: pydantic turns UTF-8 bytes into text
            yield location, value.decode("utf-8", "replace")
        elif isinstance(value, dict | list | tuple):
            if id(value) in seen:  # YAML anchors share one object; visit it once
                continue
            seen.add(id(value))
            items = value.items() if isinstance(value, dict) else enumerate(value)
            for key, item in items:
                if isinstance(key, str):
                    yield (*location, key), key
                stack.append(((*location, key), item))


def _bad_text(text: str) -> str | None:
    if "\x00" in text:
        return "text contains a NUL character"
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return "text contains an unpaired surrogate (not encodable as UTF-8)"
    return None


def _printable(text: str) -> str:
    """``text`` with unprintable characters escaped (a NUL, a lone surrogate)."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def validate_mapping(model: type[Model], data: dict, path: Path | str) -> Model:
    for location, text in _strings(data):
        problem = _bad_text(text)
        if problem:
            key = ".".join(_printable(str(part)) for part in location) or "(top level)"
            raise ConfigError(f"{path}: {key}: {problem}")
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(format_validation_error(path, exc)) from None


def load_yaml_model(model: type[Model], path: Path, max_bytes: int = MAX_CONFIG_BYTES) -> Model:
    return validate_mapping(model, read_yaml_mapping(path, max_bytes), path)
