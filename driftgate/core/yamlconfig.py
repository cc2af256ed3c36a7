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
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ConfigDict, ValidationError

from driftgate.core.errors import EXIT_USAGE, DriftgateError

Model = TypeVar("Model", bound=BaseModel)


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


def parse_yaml(text: str, source: Path | str) -> Any:
    """``yaml.safe_load(text)``, every failure a ConfigError naming ``source``."""
    try:
        return yaml.safe_load(text)
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


def read_yaml_mapping(path: Path) -> dict:
    """Parse ``path`` as a YAML mapping (an empty file is an empty mapping)."""
    problem = missing_file(path)
    if problem:
        raise ConfigError(f"{path}: {problem}")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not valid YAML: {exc}") from exc
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror or exc}") from exc
    data = parse_yaml(text, path)
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


def load_yaml_model(model: type[Model], path: Path) -> Model:
    return validate_mapping(model, read_yaml_mapping(path), path)
