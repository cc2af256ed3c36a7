"""Records with categorical fields: accepted as text or integer code, encoded exactly as
training encodes a frame, and refused by name when they are neither."""

from __future__ import annotations

import numpy as np
import pandas as pd

from driftgate.serving.encoding import RecordEncoder
from driftgate.serving.validation import build_checker
from driftgate.training.features import FeatureSpec, encode_features

SPECS = [
    FeatureSpec("Region", "categorical", ("North", "South")),
    FeatureSpec("Grade", "categorical", ("1", "2", "3")),
    FeatureSpec("Amount"),
]
RECORDS = [
    {"Region": "South", "Grade": 3, "Amount": 1.5},
    {"Region": "Mars", "Grade": "2", "Amount": 2},  # unseen region, code as text
    {"Region": None, "Grade": 7, "Amount": None},  # missing, unseen code
]


def test_records_encode_as_training_encodes_the_same_frame():
    matrix = RecordEncoder(SPECS).encode(RECORDS)
    expected = encode_features(pd.DataFrame(RECORDS), SPECS)
    np.testing.assert_array_equal(matrix, expected)
    assert matrix[1, 0] == 2 and matrix[2, 1] == 3  # the unseen bucket, len(categories)
    assert np.isnan(matrix[2, 0]) and np.isnan(matrix[2, 2])


def test_all_numeric_models_keep_their_one_array_call():
    encoder = RecordEncoder([FeatureSpec("a"), FeatureSpec("b")])
    matrix = encoder.encode([{"a": 1, "b": None}])
    assert matrix.dtype == np.float32 and np.isnan(matrix[0, 1])


def test_categorical_fields_take_text_or_integer_codes_and_nothing_else():
    checker = build_checker(SPECS, None)
    assert checker.validate(RECORDS[0]) == []
    assert checker.validate({"Region": "North", "Grade": "1", "Amount": 0.0}) == []
    errors = checker.validate({"Region": 1.5, "Grade": True, "Amount": "much"})
    assert [(e.field, e.reason.split(",")[0]) for e in errors] == [
        ("Region", "expected a category (text or integer code)"),
        ("Grade", "expected a category (text or integer code)"),
        ("Amount", "expected a number"),
    ]


def test_an_integer_code_for_a_text_category_is_read_as_its_text(tmp_path):
    contract = tmp_path / "contract.yaml"
    contract.write_text(
        "name: c\ncolumns:\n"
        "  Region: {dtype: string, categories: [North, South]}\n"
        "  Grade: {dtype: string, categories: ['1', '2', '3']}\n"
        "  Amount: {dtype: float, nullable: true}\n"
    )
    checker = build_checker(SPECS, contract)
    (record,) = checker.normalise([{"Region": "North", "Grade": 2, "Amount": 1.0}])
    assert record["Grade"] == "2"
    assert checker.validate(record) == []
    refused = checker.validate({"Region": "Mars", "Grade": "2", "Amount": 1.0})
    assert [e.rule for e in refused] == ["columns.Region.categories"]


def test_a_boolean_the_contract_types_as_text_keeps_text_and_refuses_other_words(tmp_path):
    """A CSV of "true"/"false" inferred as a string column: every spelling becomes the
    text, and a word that is no boolean is refused by the model check, not scored as
    an unseen category."""
    contract = tmp_path / "contract.yaml"
    contract.write_text("name: c\ncolumns:\n  Member: {dtype: string}\n  Amount: {dtype: float}\n")
    specs = [FeatureSpec("Member", "categorical", ("false", "true")), FeatureSpec("Amount")]
    checker = build_checker(specs, contract)
    sent = [{"Member": value, "Amount": 1.0} for value in (True, "False", 1, "yes")]
    records = checker.normalise(sent)
    assert [r["Member"] for r in records] == ["true", "false", "true", "yes"]
    assert [checker.validate(r) for r in records[:3]] == [[], [], []]
    (refused,) = checker.validate(records[3])
    assert refused.field == "Member" and refused.reason.startswith("expected a boolean")
