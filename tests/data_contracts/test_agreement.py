"""Both validators agree: a value is flagged per record exactly when GX flags its row
(but for a null in a column tolerating a share of them, a batch rule).

Hypothesis builds small batches of records mixing good values with nulls, NaN,
infinities, out-of-range numbers, strings in numeric fields and unseen categories. The
batch goes through GX (via validate_batch), each record through RecordValidator; for
every row-level rule GX judged row by row, the flagged rows must be the same.
"""

from __future__ import annotations

import math

import pandas as pd
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from driftgate.data_contracts import Contract, RecordValidator, validate_batch
from driftgate.data_contracts.model import ROW_LEVEL_KINDS

CONTRACT = Contract.model_validate(
    {
        "name": "agreement",
        "extra_columns": "allow",
        "columns": {
            "x": {"dtype": "float", "nullable": False, "min": -1.0, "max": 1.0},
            "y": {"dtype": "float", "max_null_share": 0.5},  # finite rule, tolerant nulls
            "n": {"dtype": "int", "min": 0, "max": 10, "max_out_of_range_share": 0.2},
            "k": {"dtype": "string", "nullable": True, "categories": ["a", "b"]},
            "b": {"dtype": "bool", "nullable": False},
        },
    }
)
RECORDS = RecordValidator.from_contract(CONTRACT)
MAX_ROWS = 12

junk = st.sampled_from(["", "1.5", "nan"])


def mostly(good: st.SearchStrategy, bad: st.SearchStrategy) -> st.SearchStrategy:
    """Good values four times as often as bad ones, so many columns keep their dtype
    (one string in a column makes GX judge its type row by row and skip its range)."""
    return st.one_of(good, good, good, good, bad)


floats = mostly(
    st.one_of(st.floats(-1.5, 1.5), st.sampled_from([math.nan, math.inf, -math.inf, None, 0])),
    junk,
)
ints = mostly(st.integers(-3, 13), st.one_of(st.sampled_from([None, 2.5, 3.0]), junk))
texts = mostly(st.sampled_from(["a", "b", "z", "A", None]), st.integers(0, 2))
bools = mostly(st.booleans(), st.sampled_from([None, 1, "true"]))
records = st.lists(
    st.fixed_dictionaries({"x": floats, "y": floats, "n": ints, "k": texts, "b": bools}),
    min_size=1,
    max_size=MAX_ROWS,
)
# Well-typed values only (with nulls, NaN, infinities, out-of-range and unseen values):
# every column keeps its pandas dtype, so GX judges range, finite and categories.
typed_records = st.lists(
    st.fixed_dictionaries(
        {
            "x": st.one_of(st.floats(-1.5, 1.5), st.sampled_from([math.nan, None])),
            "y": st.one_of(st.floats(-5, 5), st.sampled_from([math.inf, -math.inf, math.nan])),
            "n": st.integers(-3, 13),
            "k": st.sampled_from(["a", "b", "z", None]),
            "b": st.booleans(),
        }
    ),
    min_size=1,
    max_size=MAX_ROWS,
)


def gx_flags(frame: pd.DataFrame) -> tuple[set[tuple[int, str, str]], set[tuple[str, str]]]:
    """Rows GX flagged per (column, kind), and which (column, kind) it judged per row."""
    result = validate_batch(CONTRACT, frame, max_examples=MAX_ROWS)
    flagged, judged = set(), set()
    for rule in result.rules:
        if rule.kind not in ROW_LEVEL_KINDS or rule.skipped or rule.unexpected_share is None:
            continue
        judged.add((rule.column, rule.kind))
        flagged |= {(example["row"], rule.column, rule.kind) for example in rule.examples}
    return flagged, judged


def assert_agreement(batch: list[dict]) -> None:
    frame = pd.DataFrame(batch)
    flagged_by_gx, judged = gx_flags(frame)
    flagged_by_records = {
        (row, error.field, error.rule.rsplit(".", 1)[-1])
        for row, record in enumerate(frame.to_dict("records"))
        for error in RECORDS.validate(record)
    }
    comparable = {flag for flag in flagged_by_records if flag[1:] in judged}
    # The one deliberate difference (issue 30): GX flags each null row of a column that
    # tolerates a share of nulls; the share bounds a batch, so a record is not refused.
    tolerated = {
        flag
        for flag in flagged_by_gx
        if flag[2] == "nulls" and CONTRACT.columns[flag[1]].allowed_null_share > 0
    }
    assert comparable == flagged_by_gx - tolerated


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(records)
def test_record_validator_flags_the_rows_gx_flags(batch: list[dict]) -> None:
    assert_agreement(batch)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(typed_records)
def test_agreement_on_well_typed_batches(batch: list[dict]) -> None:
    assert_agreement(batch)


def test_agreement_on_a_hand_built_batch() -> None:
    batch = [
        {"x": 0.5, "y": 1.0, "n": 3, "k": "a", "b": True},
        {"x": 2.0, "y": math.inf, "n": 30, "k": "z", "b": False},
        {"x": None, "y": None, "n": 4, "k": None, "b": True},
    ]
    flagged, _ = gx_flags(pd.DataFrame(batch))
    assert flagged == {
        (1, "x", "range"),
        (1, "y", "finite"),
        (1, "n", "range"),
        (1, "k", "categories"),
        (2, "x", "nulls"),
        (2, "y", "nulls"),
    }
    assert [e.rule for e in RECORDS.validate(batch[1])] == [
        "columns.x.range",
        "columns.y.finite",
        "columns.n.range",
        "columns.k.categories",
    ]
