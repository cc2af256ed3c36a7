"""Fuzzing the data contract loader: any file loads or raises ConfigError naming it.

Hypothesis mutates the committed ``data_contracts/rainfall.yaml`` (values of any type,
deleted and unknown keys, NaN/inf bounds, NUL and surrogates in names, ...), corrupts
its bytes, and writes hostile documents (deep nesting, 6,000-digit integers, Python
tags, impossible dates, UTF-16). ``Contract.load`` and ``Contract.from_yaml`` must
return a contract or raise ``ConfigError`` whose message starts with the file name:
never a TypeError, a RecursionError, a yaml error or a UnicodeDecodeError.
"""

from __future__ import annotations

import pytest
from hypothesis import given

from driftgate.core.yamlconfig import ConfigError
from driftgate.data_contracts import Contract, RecordValidator
from tests.data_contracts.conftest import CONTRACT_PATH
from tests.yaml_mutations import FUZZ, assert_loads_or_config_error, write, yaml_files

REAL = CONTRACT_PATH.read_text(encoding="utf-8")
TOP_KEYS = ["name", "version", "rows", "extra_columns", "columns", "description"]


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return tmp_path_factory.mktemp("fuzz-contract")


@FUZZ
@given(data=yaml_files(REAL, TOP_KEYS))
def test_contract_files_load_or_raise_config_error_naming_the_file(folder, data):
    path = write(folder / "contract.yaml", data)
    contract = assert_loads_or_config_error(Contract.load, path)
    if contract is not None:  # what loads compiles: rules and the per-record validator
        assert contract.rules()
        RecordValidator.from_contract(contract).validate({})


@FUZZ
@given(data=yaml_files(REAL, TOP_KEYS))
def test_contract_text_parses_or_raises_config_error_naming_the_source(data):
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return  # from_yaml takes text; the file loader above covers undecodable bytes
    try:
        Contract.from_yaml(text, source="fuzzed.yaml")
    except ConfigError as exc:
        assert str(exc).startswith("fuzzed.yaml: "), str(exc)[:300]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("name: x\ncolumns: " + "[" * 20_000 + "]" * 20_000, "nested too deeply"),
        ("name: x\nversion: " + "9" * 5000 + "\ncolumns: {a: {dtype: float}}", "4300 digits"),
        ("name: x\ncolumns: {a: {dtype: float, min: 0, max: .nan}}", "finite number"),
        ("name: x\ncolumns: {a: {dtype: float, max: .inf}}", "finite number"),
        ('name: "a\\0b"\ncolumns: {a: {dtype: float}}', "NUL"),
        ('name: x\ncolumns: {"a\\ud800": {dtype: float}}', "surrogate"),
        ("name: !!binary YQBi\ncolumns: {a: {dtype: float}}", "NUL"),  # b"a\x00b"
        ("name: x\ndescription: 2021-02-30\ncolumns: {a: {dtype: float}}", "cannot be read"),
    ],
)
def test_regressions_found_by_fuzzing(folder, text, message):
    """Each raised something other than ConfigError, or loaded, before the fixes that
    came with these tests (RecursionError, ValueError, a NaN bound, a NUL name...)."""
    path = write(folder / "regression.yaml", text.encode("utf-8", "surrogatepass"))
    with pytest.raises(ConfigError, match=message) as raised:
        Contract.load(path)
    assert str(raised.value).startswith(f"{path}: ")
