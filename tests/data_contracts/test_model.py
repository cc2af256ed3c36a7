"""The contract format: loading, errors that name file and key, rules, YAML round trip."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from driftgate.core.yamlconfig import ConfigError
from driftgate.data_contracts import RULE_KINDS, Contract
from driftgate.data_contracts.model import rule_kind

from .conftest import CONTRACT_PATH, with_column

VALID = """
name: toy
columns:
  x: {dtype: float, min: 0, max: 1}
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "toy.yaml"
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def test_committed_contract_loads_with_optional_label_and_date(contract: Contract) -> None:
    assert contract.name == "rainfall"
    assert not contract.columns["rain"].required
    assert not contract.columns["date"].required
    assert all(
        spec.required for name, spec in contract.columns.items() if name not in ("rain", "date")
    )
    assert contract.columns["rain"].categories == [0, 1]


def test_yaml_round_trip_keeps_the_contract(contract: Contract) -> None:
    assert Contract.from_yaml(contract.to_yaml()) == contract


def test_rule_ids_follow_the_scheme(contract: Contract) -> None:
    ids = [rule.id for rule in with_column(contract, "date", unique=True).rules()]
    assert ids[:2] == ["table.row_count", "table.extra_columns"]
    assert "columns.temperature.nulls" in ids
    assert "columns.temperature.range" in ids
    assert "columns.rain.categories" in ids
    assert "columns.date.unique" in ids
    assert len(ids) == len(set(ids))
    assert {rule_kind(i) for i in ids} <= set(RULE_KINDS)


def test_finite_rule_only_for_float_columns_without_range() -> None:
    contract = Contract.model_validate(
        {"name": "t", "columns": {"a": {"dtype": "float"}, "b": {"dtype": "float", "max": 1}}}
    )
    ids = {rule.id for rule in contract.rules()}
    assert "columns.a.finite" in ids
    assert "columns.b.finite" not in ids and "columns.b.range" in ids


def test_nullable_true_means_no_null_rule() -> None:
    contract = Contract.model_validate(
        {"name": "t", "columns": {"a": {"dtype": "string", "nullable": True}}}
    )
    assert "columns.a.nulls" not in {rule.id for rule in contract.rules()}
    assert contract.columns["a"].allowed_null_share == 1.0


@pytest.mark.parametrize(
    ("text", "key", "words"),
    [
        (
            "name: toy\ncolumns:\n  x:\n    dtype: float\n    colour: red\n",
            "columns.x.colour",
            "unknown key",
        ),
        (VALID + "owner: me\n", "owner", "unknown key"),
        ("name: toy\ncolumns:\n  x: {dtype: float, min: 2, max: 1}\n", "columns.x.max", "min"),
        ("name: toy\ncolumns:\n  x: {dtype: decimal}\n", "columns.x.dtype", "'float'"),
        ("name: toy\nrows: {min: 5, max: 2}\ncolumns:\n  x: {dtype: int}\n", "rows.max", "min"),
        (
            "name: toy\ncolumns:\n  x: {dtype: float, nullable: false, max_null_share: 0.1}\n",
            "columns.x.max_null_share",
            "nullable",
        ),
        (
            "name: toy\ncolumns:\n  x: {dtype: float, max_null_share: 1.5}\n",
            "columns.x.max_null_share",
            "1",
        ),
        ("name: toy\ncolumns:\n  x: {dtype: string, min: 0}\n", "columns.x", "min/max"),
        ("name: toy\ncolumns:\n  x: {dtype: string, categories: [1, 2]}\n", "columns.x", "string"),
        ("name: toy\ncolumns: {}\n", "columns", "at least 1"),
        ("columns:\n  x: {dtype: int}\n", "name", "required"),
    ],
)
def test_malformed_contract_names_file_and_key(
    tmp_path: Path, text: str, key: str, words: str
) -> None:
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as caught:
        Contract.load(path)
    message = str(caught.value)
    assert str(path) in message
    assert f": {key}: " in message
    assert words in message


def test_missing_and_non_yaml_files_are_config_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="file not found"):
        Contract.load(tmp_path / "absent.yaml")
    with pytest.raises(ConfigError, match="not valid YAML"):
        Contract.load(write(tmp_path, "name: [unclosed\n"))


def test_committed_file_path_exists() -> None:
    assert CONTRACT_PATH.is_file()
