"""The data contract: what a data set promises, as validated configuration.

A contract is one YAML file per data set (``data_contracts/<name>.yaml``) loaded into
:class:`Contract` (pydantic, ``extra="forbid"``), so a typo or an impossible bound is
reported as ``FILE: columns.temperature.max: ...`` before any data is read.

The contract is expanded into *rules* (:meth:`Contract.rules`): one check each, with a
stable id that reports, gates and logs refer to::

    table.row_count                 rows.min <= number of rows <= rows.max
    table.extra_columns             no column outside the contract (extra_columns: forbid)
    columns.<column>.exists         the column is present (required columns only fail)
    columns.<column>.dtype          the values have the declared type
    columns.<column>.nulls          share of nulls <= max_null_share
    columns.<column>.range          share of values outside [min, max] <= max_out_of_range_share
    columns.<column>.finite         no +/-inf (float columns without a range)
    columns.<column>.categories     every value is one of ``categories`` (unless ``unseen: allow``)
    columns.<column>.unique         no value occurs twice

The last segment is the rule *kind*; a gate refers to all rules of one kind as
``contract:<kind>`` (for example ``contract:nulls``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import yaml
from pydantic import Field, ValidationInfo, field_validator, model_validator

from driftgate.core.yamlconfig import (
    ConfigError,
    StrictModel,
    load_yaml_model,
    parse_yaml,
    validate_mapping,
)

DType = Literal["float", "int", "bool", "string", "datetime"]
NUMERIC_DTYPES = ("float", "int")
# Types whose values can be listed as categories (floats compare badly for equality).
CATEGORICAL_DTYPES = ("int", "bool", "string")

RuleKind = Literal[
    "row_count",
    "extra_columns",
    "exists",
    "dtype",
    "nulls",
    "range",
    "finite",
    "categories",
    "unique",
]
RULE_KINDS: tuple[str, ...] = RuleKind.__args__  # type: ignore[attr-defined]
# Rules that judge each row on its own; the per-record validator checks exactly these
# (plus presence of required fields and, when forbidden, extra fields).
ROW_LEVEL_KINDS = ("dtype", "nulls", "range", "finite", "categories")


class RowCountSpec(StrictModel):
    """Bounds on the number of rows of a batch (both inclusive)."""

    min: int = Field(default=1, ge=0, description="Fewest rows a batch may have.")
    max: int | None = Field(default=None, ge=0, description="Most rows; null means no bound.")

    @field_validator("max")
    @classmethod
    def _max_not_below_min(cls, value: int | None, info: ValidationInfo) -> int | None:
        low = info.data.get("min")
        if value is not None and low is not None and value < low:
            raise ValueError(f"max ({value}) must be greater than or equal to min ({low})")
        return value


class ColumnSpec(StrictModel):
    """What one column promises. Unset keys mean "not checked"."""

    dtype: DType = Field(description="Type of the values: float, int, bool, string, datetime.")
    description: str | None = None
    required: bool = Field(
        default=True,
        description="A required column must be present; an optional one is checked if present.",
    )
    nullable: bool | None = Field(
        default=None,
        description="Shorthand: false means max_null_share 0, true means 1 (any share).",
    )
    max_null_share: float | None = Field(
        default=None,
        ge=0.0,
        le=1.0,
        description="Largest share of nulls (NaN, None, NaT) allowed in a batch.",
    )
    min: float | None = Field(default=None, description="Smallest allowed value (inclusive).")
    max: float | None = Field(default=None, description="Largest allowed value (inclusive).")
    max_out_of_range_share: float = Field(
        default=0.0,
        ge=0.0,
        le=1.0,
        description="Share of non-null values allowed outside [min, max] in a batch.",
    )
    allow_infinite: bool = Field(
        default=False,
        description="Float columns only: whether +/-inf may appear (checked when no range).",
    )
    categories: list[int | bool | str] | None = Field(
        default=None, description="The only values allowed (non-null)."
    )
    unseen: Literal["reject", "allow"] = Field(
        default="reject",
        description="A value outside ``categories``: ``reject`` fails the categories rule "
        "(batch and record); ``allow`` passes it (the model scores it in its unseen-category "
        "bucket and the drift monitors see the new category).",
    )
    unique: bool = Field(default=False, description="Whether every non-null value is distinct.")

    @field_validator("max")
    @classmethod
    def _max_not_below_min(cls, value: float | None, info: ValidationInfo) -> float | None:
        low = info.data.get("min")
        if value is not None and low is not None and value < low:
            raise ValueError(f"max ({value}) must be greater than or equal to min ({low})")
        return value

    @field_validator("max_null_share")
    @classmethod
    def _share_agrees_with_nullable(cls, value: float | None, info: ValidationInfo) -> float | None:
        nullable = info.data.get("nullable")
        if value is not None and nullable is False and value > 0:
            raise ValueError(f"max_null_share {value} contradicts nullable: false")
        return value

    @field_validator("categories")
    @classmethod
    def _categories_not_empty(cls, value: list | None) -> list | None:
        if value is not None and not value:
            raise ValueError("categories must list at least one value (or be left out)")
        return value

    @model_validator(mode="after")
    def _keys_fit_dtype(self) -> ColumnSpec:
        # Named by key in the message; pydantic places model-level errors on the column.
        if (self.min is not None or self.max is not None) and self.dtype not in NUMERIC_DTYPES:
            raise ValueError(f"min/max apply to float and int columns, not dtype {self.dtype}")
        if self.categories is not None and self.dtype not in CATEGORICAL_DTYPES:
            raise ValueError(f"categories apply to int, bool and string columns, not {self.dtype}")
        if self.categories is not None:
            wrong = [v for v in self.categories if not _is_category_of(v, self.dtype)]
            if wrong:
                raise ValueError(f"categories {wrong!r} are not {self.dtype} values")
        if self.unseen == "allow" and self.categories is None:
            raise ValueError("unseen applies to columns that list categories")
        if self.allow_infinite and self.dtype != "float":
            raise ValueError("allow_infinite applies to float columns only")
        return self

    @property
    def allowed_null_share(self) -> float:
        """The effective null tolerance: ``max_null_share``, else from ``nullable``."""
        if self.max_null_share is not None:
            return self.max_null_share
        return 1.0 if self.nullable else 0.0

    @property
    def has_range(self) -> bool:
        return self.min is not None or self.max is not None


class Contract(StrictModel):
    """A data set's contract: its columns and table-level promises."""

    name: str = Field(min_length=1, description="Data set name, used in reports and suites.")
    description: str | None = None
    version: int = Field(default=1, ge=1, description="Bump when the promise changes.")
    rows: RowCountSpec = Field(default_factory=RowCountSpec)
    extra_columns: Literal["allow", "forbid"] = Field(
        default="forbid", description="Whether columns outside the contract may appear."
    )
    columns: dict[str, ColumnSpec] = Field(min_length=1)

    @classmethod
    def load(cls, path: str | Path) -> Contract:
        """Load and validate a contract file.

        Raises:
            ConfigError: the file is missing, not YAML, or breaks the format; the
                message names the file and the key (``rainfall.yaml: columns.x.max: ...``).
        """
        return load_yaml_model(cls, Path(path))

    @classmethod
    def from_yaml(cls, text: str, source: str = "<string>") -> Contract:
        """Parse a contract from YAML text; ``source`` names it in errors."""
        data = parse_yaml(text, source)
        if not isinstance(data, dict):
            raise ConfigError(f"{source}: expected a mapping of keys at the top level")
        return validate_mapping(cls, data, source)

    def to_yaml(self) -> str:
        """The contract as YAML, leaving out keys that hold their default."""
        data = self.model_dump(mode="json", exclude_defaults=True)
        # name and columns are required; keep the table keys visible for the editor.
        data["rows"] = self.rows.model_dump(mode="json")
        data["extra_columns"] = self.extra_columns
        ordered = {key: data[key] for key in _KEY_ORDER if key in data}
        ordered["columns"] = {
            name: spec.model_dump(mode="json", exclude_defaults=True)
            | ({"required": False} if not spec.required else {})
            for name, spec in self.columns.items()
        }
        return yaml.safe_dump(ordered, sort_keys=False, default_flow_style=None, width=100)

    def rules(self) -> list[Rule]:
        """Every check this contract makes, in report order (table first)."""
        rules = [Rule("table.row_count", "row_count", None)]
        if self.extra_columns == "forbid":
            rules.append(Rule("table.extra_columns", "extra_columns", None))
        for column, spec in self.columns.items():
            kinds: list[str] = ["exists", "dtype"]
            if spec.allowed_null_share < 1.0:
                kinds.append("nulls")
            if spec.has_range:
                kinds.append("range")
            elif spec.dtype == "float" and not spec.allow_infinite:
                kinds.append("finite")
            if spec.categories is not None and spec.unseen == "reject":
                kinds.append("categories")
            if spec.unique:
                kinds.append("unique")
            rules.extend(Rule(rule_id(kind, column), kind, column) for kind in kinds)
        return rules


_KEY_ORDER = ("name", "description", "version", "rows", "extra_columns")


def _is_category_of(value: object, dtype: str) -> bool:
    if dtype == "bool":
        return isinstance(value, bool)
    if dtype == "int":
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, str)


@dataclass(frozen=True)
class Rule:
    """One check of a contract: its id, its kind and the column it is about."""

    id: str
    kind: str
    column: str | None


def rule_id(kind: str, column: str | None = None) -> str:
    """The id of a rule: ``table.<kind>`` or ``columns.<column>.<kind>``."""
    return f"table.{kind}" if column is None else f"columns.{column}.{kind}"


def rule_kind(rule: str) -> str:
    """The kind of a rule id (its last segment), as used in ``contract:<kind>``."""
    return rule.rsplit(".", 1)[-1]
