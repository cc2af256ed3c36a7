"""The request path's fast paths answer exactly what the full paths answer.

Each fast path (issue 32) only accepts what its full path would accept, and hands
everything else to it: the precompiled record check (``PlainRecordCheck``) against the
contract's and the model's rules; the plain body reader against pydantic; the answer's
bytes (orjson) against the json module's; the group commit's time conversion against
pandas'. Hypothesis draws records near every boundary
(range edges, float32's limit, NaN, infinities, huge integers, booleans, text, nulls,
missing and extra fields); the answers must be identical, error words included.
"""

from __future__ import annotations

import functools
import json
import math
from datetime import UTC, datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from driftgate.data_contracts import Contract
from driftgate.serving.responses import SafeJSONResponse, json_bytes
from driftgate.serving.schemas import PredictRequest, plain_predict_request
from driftgate.serving.validation import (
    FLOAT32_MAX,
    ContractChecker,
    FeatureChecker,
    build_checker,
)
from driftgate.stores._time import _storable_us, storable_time
from driftgate.training.features import FeatureSpec
from tests.serving.conftest import REPO_ROOT

CONTRACT_PATH = REPO_ROOT / "data_contracts" / "rainfall.yaml"
CONTRACT = Contract.load(CONTRACT_PATH)
FEATURES = tuple(
    name for name, spec in CONTRACT.columns.items() if spec.dtype == "float" and spec.required
)


@functools.cache
def checkers() -> dict:
    return {
        "contract": build_checker(FEATURES, CONTRACT_PATH),
        "model": build_checker(FEATURES, None),
    }


def full(checker):
    """The same checker with its precompiled acceptance switched off."""
    if isinstance(checker, ContractChecker):
        model = full(checker.model_checker)
        return ContractChecker(checker.contract_validator, model, checker.text_categories)
    clone = FeatureChecker(
        checker.features, checker.allow_extra, checker.nullable, checker.categorical,
        checker.boolean, checker.boolean_as_text,
    )  # fmt: skip
    clone.plain = None
    return clone


def edges() -> list:
    values = [0.0, -0.0, 1, -1, 0, FLOAT32_MAX, -FLOAT32_MAX, math.nextafter(FLOAT32_MAX, math.inf),
              math.inf, -math.inf, math.nan, 10**400, True, False, None, "1.0", ""]  # fmt: skip
    for spec in CONTRACT.columns.values():
        for bound in (spec.min, spec.max):
            if bound is not None:
                values += [bound, math.nextafter(bound, math.inf), math.nextafter(bound, -math.inf)]
    return values


values = st.one_of(
    st.sampled_from(edges()),
    st.floats(min_value=-5, max_value=7),
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(min_value=-10, max_value=10),
)


@st.composite
def records(draw) -> dict:
    record = {name: draw(values) for name in FEATURES}
    for name in draw(st.lists(st.sampled_from(FEATURES), max_size=2, unique=True)):
        del record[name]
    extras = draw(st.dictionaries(st.sampled_from(["date", "rain", "temprature"]), values,
                                  max_size=2))  # fmt: skip
    return {**record, **extras}


@settings(max_examples=400, deadline=None)
@given(record=records())
def test_the_precompiled_check_answers_what_the_rules_answer(record):
    for checker in checkers().values():
        assert checker.plain is not None  # the demo's contract and model: numeric only
        assert checker.validate(record) == full(checker).validate(record)


def test_a_plain_record_is_accepted_without_the_rules_and_a_bad_one_still_named():
    checker = checkers()["contract"]
    record = dict.fromkeys(FEATURES, 0.0)
    assert checker.plain(record) and checker.validate(record) == []
    record["temperature"] = 99.0
    assert not checker.plain(record)
    [error] = checker.validate(record)
    assert (error.field, error.reason, error.rule) == (
        "temperature", "value 99.0 outside [-3.87, 2.99]", "columns.temperature.range",
    )  # fmt: skip


@pytest.mark.parametrize(
    "specs",
    [
        [FeatureSpec("temperature"), FeatureSpec("kind", "categorical", ("a", "b"))],
        [FeatureSpec("temperature"), FeatureSpec("flag", "categorical", ("false", "true"))],
    ],
)
def test_models_with_categories_take_the_rules(specs):
    assert build_checker(specs, None).plain is None


json_values = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-(10**30), max_value=10**30),
    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=300),
    st.lists(st.integers(), max_size=2), st.dictionaries(st.text(max_size=3), st.integers(),
                                                         max_size=1),
)  # fmt: skip
bodies = st.one_of(
    st.fixed_dictionaries(
        {
            "records": st.lists(
                st.dictionaries(st.text(max_size=6), json_values, max_size=4), max_size=3
            )
        },
        optional={"timestamp": st.just("2026-01-01T00:00:00Z"), "extra": st.integers()},
    ),
    json_values,
)


def typed(records: list[dict]) -> list:
    return [[(k, type(v), repr(v)) for k, v in r.items()] for r in records]


@settings(max_examples=400, deadline=None)
@given(body=bodies)
def test_a_plain_body_reads_as_pydantic_reads_it(body):
    """What the plain reader takes, pydantic accepts with the very same values and
    types; anything it declines goes to pydantic, which words the refusal."""
    read = plain_predict_request(body)
    if read is None:
        return
    validated = PredictRequest.model_validate(body)
    assert typed(read.records) == typed(validated.records)
    assert read.timestamp is None and validated.timestamp is None


@settings(max_examples=300, deadline=None)
@given(
    content=st.dictionaries(
        st.text(max_size=8),
        st.one_of(
            st.floats(allow_nan=False, allow_infinity=False),
            st.text(max_size=20),
            st.booleans(),
            st.integers(min_value=-(2**70), max_value=2**70),
            st.lists(st.floats(allow_nan=False, allow_infinity=False), max_size=3),
        ),
        max_size=5,
    )
)
def test_answer_bytes_are_ascii_json_of_the_same_content(content):
    rendered = json_bytes(content)
    assert rendered.isascii()
    assert json.loads(rendered) == json.loads(SafeJSONResponse(content).body)


def test_the_common_body_and_answer_take_the_fast_paths_and_the_rest_does_not():
    record = dict.fromkeys(FEATURES, 0.5)
    assert plain_predict_request({"records": [record]}).records == [record]
    assert plain_predict_request({"records": [record], "timestamp": "2026-01-01T00:00Z"}) is None
    assert plain_predict_request({"records": [{**record, "kind": "x" * 257}]}) is None
    # An unpaired surrogate (a request's "\ud800" echoed in an error) is escaped as before.
    content = {"detail": "bad \ud800 field", "value": 2**80}
    assert json_bytes(content) == SafeJSONResponse(content).body


@settings(max_examples=300, deadline=None)
@given(
    moment=st.datetimes(
        min_value=datetime(1677, 6, 1), max_value=datetime(2262, 6, 1), timezones=st.just(UTC)
    )
)
def test_sample_times_count_the_microseconds_pandas_counts(moment):
    """The group commit's time conversion (integer arithmetic for the service's UTC
    clock) stores what the pandas path stores, and refuses what it refuses."""
    try:
        expected = storable_time(moment).value // 1000
    except ValueError as refused:
        with pytest.raises(ValueError, match="outside"):
            _storable_us(moment)
        assert "outside" in str(refused)
        return
    assert _storable_us(moment) == expected


@pytest.mark.parametrize("enabled", [False, True])
def test_opentelemetry_off_asks_for_no_provider_per_request(monkeypatch, enabled):
    """``serving.opentelemetry`` false (the default): FastAPI's native telemetry asks
    OpenTelemetry for its providers on no request; true: on every request, as FastAPI's
    default does (and then sends spans to a provider the operator configured)."""
    from fastapi import FastAPI
    from opentelemetry import trace
    from starlette.testclient import TestClient

    from driftgate.serving.app import _telemetry

    asked = []
    real = trace.get_tracer_provider
    monkeypatch.setattr(trace, "get_tracer_provider", lambda: asked.append(1) or real())
    app = FastAPI(**_telemetry(enabled))
    app.get("/ping")(lambda: {"ok": True})
    with TestClient(app) as client:
        asked.clear()  # the lifespan's own look-ups are not per request
        for _ in range(3):
            assert client.get("/ping").json() == {"ok": True}
    assert (len(asked) >= 3) if enabled else not asked
