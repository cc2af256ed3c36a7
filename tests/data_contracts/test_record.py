"""The per-record validator used by the inference service."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from driftgate.data_contracts import Contract, RecordError, RecordValidator

from .conftest import with_column


@pytest.fixture(scope="module")
def validator(contract: Contract) -> RecordValidator:
    return RecordValidator.from_contract(contract)


@pytest.fixture(scope="module")
def good_record(reference) -> dict:
    return reference.drop(columns=["date", "rain"]).iloc[0].to_dict()


def test_reference_records_are_valid(validator: RecordValidator, reference) -> None:
    # The two tolerated out-of-range readings of sea-level pressure (and two of the
    # max sustained wind speed) are the only records a strict per-record check refuses.
    invalid = validator.validate_many(reference.to_dict("records"))
    fields = {error.field for _, errors in invalid for error in errors}
    assert len(invalid) <= 4
    assert fields <= {"sea_level_pressure", "max_sustained_wind_speed"}


def test_request_without_label_and_date_is_valid(validator: RecordValidator, good_record) -> None:
    assert validator.validate(good_record) == []
    assert validator.is_valid(good_record)


@pytest.mark.parametrize(
    ("field", "value", "rule", "words"),
    [
        ("rain", None, "columns.rain.nulls", "null"),
        ("rain", math.nan, "columns.rain.nulls", "null"),
        ("rain", np.float32("nan"), "columns.rain.nulls", "null"),
        ("temperature", "12.5", "columns.temperature.dtype", "expected float, got str"),
        ("temperature", True, "columns.temperature.dtype", "got bool"),
        ("temperature", [1.0], "columns.temperature.dtype", "got list"),
        ("temperature", 99.0, "columns.temperature.range", "outside [-3.87, 2.99]"),
        ("temperature", math.inf, "columns.temperature.range", "outside"),
        ("rain", 2, "columns.rain.categories", "not in categories [0, 1]"),
        ("rain", 1.0, "columns.rain.dtype", "expected int, got float"),
        ("date", "2020-01-01", "columns.date.dtype", "expected datetime"),
    ],
)
def test_bad_values_name_field_rule_and_reason(
    validator: RecordValidator, good_record, field, value, rule, words
) -> None:
    errors = validator.validate({**good_record, field: value})
    assert len(errors) == 1
    assert errors[0].field == field
    assert errors[0].rule == rule
    assert words in errors[0].reason


def test_a_nullable_feature_accepts_a_null_record_within_its_batch_share(
    validator: RecordValidator, good_record
) -> None:
    # The committed contract: features `nullable: true` with `max_null_share: 0.05`.
    assert validator.validate({**good_record, "temperature": None}) == []


def test_numbers_of_any_numeric_type_are_accepted(validator: RecordValidator, good_record) -> None:
    for value in (1, np.int64(1), np.float32(0.5), 0.5):
        assert validator.validate({**good_record, "temperature": value}) == []
    assert validator.validate({**good_record, "rain": np.int64(1)}) == []
    assert validator.validate({**good_record, "date": pd.Timestamp("2020-01-01")}) == []


def test_missing_required_and_extra_fields(validator: RecordValidator, good_record) -> None:
    record = {k: v for k, v in good_record.items() if k != "dew_point"} | {"temprature": 1.0}
    assert validator.validate(record) == [
        RecordError("dew_point", "missing: required", "columns.dew_point.exists"),
        RecordError("temprature", "not in the contract", "table.extra_columns"),
    ]


def test_every_broken_field_is_reported(validator: RecordValidator, good_record) -> None:
    record = {**good_record, "temperature": "hot", "visibility": "far", "rain": 7}
    assert [e.field for e in validator.validate(record)] == ["temperature", "visibility", "rain"]


def test_a_tolerated_null_share_accepts_a_null_record(contract: Contract, good_record) -> None:
    # Issue 30: a share is a batch rule; refusing each null made a tolerated 10% share
    # into per-record refusals of normal traffic.
    tolerant = RecordValidator.from_contract(
        with_column(contract, "temperature", nullable=None, max_null_share=0.05)
    )
    assert tolerant.validate({**good_record, "temperature": None}) == []
    nullable = RecordValidator.from_contract(with_column(contract, "temperature", nullable=True))
    assert nullable.validate({**good_record, "temperature": None}) == []
    strict = RecordValidator.from_contract(
        with_column(contract, "temperature", nullable=False, max_null_share=None)
    )
    (error,) = strict.validate({**good_record, "temperature": None})
    assert (error.field, error.reason) == ("temperature", "null not allowed")
