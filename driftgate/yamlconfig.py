"""Load YAML into pydantic models with errors that name the file and the key.

Every configuration file of driftgate (project config, params, gates, contracts) goes
through :func:`load_yaml_model`, so a typo anywhere reads the same way:
``driftgate.yaml: train.lr: Input should be a valid number``.
"""

from __future__ import annotations

from pathlib import Path
from typing import TypeVar

import yaml
from pydantic import BaseModel, ValidationError

Model = TypeVar("Model", bound=BaseModel)


class ConfigError(ValueError):
    """A configuration file that is missing, unreadable or invalid (exit code 2)."""


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


def read_yaml_mapping(path: Path) -> dict:
    """Parse ``path`` as a YAML mapping (an empty file is an empty mapping)."""
    if not path.is_file():
        raise ConfigError(f"{path}: file not found")
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: not valid YAML: {exc}") from exc
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping of keys at the top level")
    return data


def validate_mapping(model: type[Model], data: dict, path: Path | str) -> Model:
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(format_validation_error(path, exc)) from None


def load_yaml_model(model: type[Model], path: Path) -> Model:
    return validate_mapping(model, read_yaml_mapping(path), path)
