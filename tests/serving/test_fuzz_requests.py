"""Fuzzing the inference API over real HTTP: bad input gets a 4xx naming the field.

One uvicorn service (the ``registered`` models, the committed rainfall contract, its own
SQLite stores) takes Hypothesis-generated requests: wrong types, missing and extra
fields, NaN/Inf as JSON tokens (``NaN``, ``1e999``) and as strings, huge numbers,
deeply nested JSON, non-UTF-8 and truncated bytes, empty bodies and record lists,
oversized bodies and too many records. For every one of them:

- the status is 4xx (never 5xx, never 200), with ``errors`` naming the broken field
  (``body`` when the bytes are not readable JSON at all);
- the sample store holds exactly as many rows as before (a refused request stores
  nothing).

Valid requests drawn from the same strategies still get 200 and are stored, so the
checks above cannot pass by refusing everything. The service is started with small
limits (``max_records_per_request=20``, ``max_body_bytes=64 KiB``) so that "huge"
requests stay cheap to generate.
"""

from __future__ import annotations

import functools
import json
import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from driftgate.config.serving import ServingSettings
from driftgate.data_contracts import Contract
from driftgate.serving.validation import build_checker
from driftgate.stores.samples import SqlSampleStore
from tests.serving.conftest import REPO_ROOT, ThreadedService, records_of

MAX_RECORDS = 20
MAX_BODY = 64 * 1024
CONTRACT = Contract.load(REPO_ROOT / "data_contracts" / "rainfall.yaml")
FUZZ = settings(
    max_examples=100,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
RAW = "__raw_json_literal__"  # a string replaced by a raw JSON literal after dumps


@pytest.fixture(scope="module")
def fuzz_service(registered, tmp_path_factory):
    folder = tmp_path_factory.mktemp("fuzz-stores")
    settings_ = ServingSettings(
        sample_store_url=f"sqlite:///{folder / 'samples.db'}",
        control_store_url=f"sqlite:///{folder / 'control.db'}",
        max_records_per_request=MAX_RECORDS,
        max_body_bytes=MAX_BODY,
        accept_client_timestamps=True,  # so that the timestamp field is fuzzed too
        model_poll_seconds=60,
        pause_poll_seconds=60,
    )
    registered.set_champion("1")
    with ThreadedService(registered.config, settings_) as running:
        running.store = SqlSampleStore(settings_.sample_store_url)
        yield running
        running.store.close()


@pytest.fixture(scope="module")
def good_records(registered) -> list[dict]:
    return records_of(registered.rows, 0, 50)


def encode(payload) -> bytes:
    """JSON text; ``{RAW: "1e999"}`` placeholders become raw literals, and Python's
    NaN/inf floats become the (non-standard) tokens some clients send."""
    text = json.dumps(payload, allow_nan=True)
    while f'{{"{RAW}": "' in text:
        start = text.index(f'{{"{RAW}": "')
        end = text.index('"}', start + len(RAW) + 6)
        text = text[:start] + text[start + len(RAW) + 6 : end] + text[end + 2 :]
    return text.encode("utf-8")


def raw(literal: str) -> dict:
    return {RAW: literal}


def post(service, body, content_type: str | None = "application/json"):
    """POST raw bytes (or an iterator of chunks: no Content-Length) to /predict."""
    headers = {"Content-Type": content_type} if content_type else {}
    return service.client.post("/predict", content=body, headers=headers)


def assert_refused(service, response, before: int, fields: set[str] | None = None) -> list:
    """4xx with errors naming the field(s), and nothing stored."""
    assert 400 <= response.status_code < 500, (response.status_code, response.text[:500])
    body = response.json()
    errors = body["errors"]
    assert errors and all(isinstance(e["field"], str) for e in errors), body  # "" is a name
    assert all(e["reason"] for e in errors), body
    assert body["request_id"] == response.headers["X-Request-ID"]
    if fields is not None:
        named = {e["field"] for e in errors}
        assert fields <= named, (fields, errors)
    assert service.store.count() == before, "a refused request stored samples"
    return errors


# -- values --------------------------------------------------------------------------

# Definitely outside every rainfall feature's range ([-4.09, 6.57] at the widest).
out_of_range = st.one_of(
    st.floats(min_value=10, max_value=1e308), st.floats(min_value=-1e308, max_value=-10)
)
huge_ints = st.one_of(
    st.integers(min_value=10, max_value=10**60),
    st.integers(min_value=-(10**60), max_value=-10),
    st.integers(min_value=1, max_value=4000).map(lambda digits: 10**digits),
)
non_finite_tokens = st.sampled_from(
    [math.nan, math.inf, -math.inf, raw("1e999"), raw("-1e999"), raw("1E400")]
)
non_finite_strings = st.sampled_from(
    ["NaN", "nan", "Infinity", "-Infinity", "inf", "1e999", "", " ", "null", "0.1"]
)
json_leaves = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.text(max_size=20)
)
nested = st.recursive(
    json_leaves,
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=5), children, max_size=3)
    ),
    max_leaves=10,
).filter(lambda value: isinstance(value, list | dict))
bad_values = st.one_of(
    out_of_range,
    huge_ints,
    non_finite_tokens,
    non_finite_strings,
    st.text(max_size=30),
    st.booleans(),
    nested,
)
# Field names a record must not carry: anything outside the contract, including
# NUL, unpaired surrogates (sent as \\ud800 escapes) and very long names.
extra_names = st.one_of(
    st.text(st.characters(codec=None, exclude_categories=()), min_size=1, max_size=30),
    st.sampled_from(["temprature", "Temperature", "temperature ", "", "\x00", "\ud800", "body"]),
    st.integers(200, 3000).map(lambda n: "f" * n),
).filter(lambda name: name not in CONTRACT.columns)


@st.composite
def broken_requests(draw, good: list[dict]):
    """A request of 1..4 good records with 1..3 mutations; the fields each breaks."""
    count = draw(st.integers(1, 4))
    start = draw(st.integers(0, len(good) - count))
    records = [dict(r) for r in good[start : start + count]]
    features = list(records[0])
    broken: set[tuple[int, str]] = set()
    for _ in range(draw(st.integers(1, 3))):
        index = draw(st.integers(0, count - 1))
        kind = draw(st.sampled_from(["value", "missing", "extra"]))
        if kind == "value":
            field = draw(st.sampled_from(features))
            records[index][field] = draw(bad_values)
        elif kind == "missing":
            field = draw(st.sampled_from(features))
            records[index].pop(field, None)
        else:
            field = draw(extra_names)
            records[index][field] = draw(st.one_of(st.floats(-1, 1), bad_values))
        broken.add((index, field))
    return records, broken


# -- bad records ---------------------------------------------------------------------


@FUZZ
@given(data=st.data())
def test_broken_records_get_4xx_naming_each_field(fuzz_service, good_records, data):
    records, broken = data.draw(broken_requests(good_records))
    body = encode({"records": records})
    before = fuzz_service.store.count()
    response = post(fuzz_service, body)
    if response.status_code == 413:  # a long value or name pushed the body over the limit
        assert len(body) > MAX_BODY
        assert_refused(fuzz_service, response, before, {"body"})
        return
    if not _encodable(json.dumps(records, ensure_ascii=False)):  # a "\\ud800" escape
        assert response.status_code == 400
        assert_refused(fuzz_service, response, before, {"body"})
        return
    errors = assert_refused(fuzz_service, response, before)
    named = {(e["record"], e["field"]) for e in errors}
    # A field broken in several ways (e.g. made NaN, then deleted) is named once; a
    # wrong JSON type is named by pydantic, a wrong value by the contract/model checks.
    if response.json()["detail"] == "invalid request":  # pydantic: the JSON types
        assert {field for _, field in named} <= {f for _, f in broken} | {"records"}
    else:
        assert broken <= named, (broken, errors)


@FUZZ
@given(data=st.data())
def test_valid_records_from_the_same_strategies_are_scored_and_stored(
    fuzz_service, good_records, data
):
    """The control: in-range numbers, ints and nulls (nullable features) all pass."""
    count = data.draw(st.integers(1, 5))
    records = []
    for record in good_records[:count]:
        record = dict(record)
        for name, spec in CONTRACT.columns.items():
            if name in record and data.draw(st.booleans()):
                record[name] = data.draw(
                    st.one_of(
                        st.floats(spec.min, spec.max),
                        st.integers(math.ceil(spec.min), math.floor(spec.max)),
                        st.none(),
                    )
                )
        records.append(record)
    before = fuzz_service.store.count()
    response = post(fuzz_service, encode({"records": records}))
    assert response.status_code == 200, response.text
    assert len(response.json()["probabilities"]) == count
    assert fuzz_service.store.count() == before + count


# -- wrong shapes ----------------------------------------------------------------------

top_level_non_objects = st.one_of(
    json_leaves, st.lists(json_leaves, max_size=3), st.just([{"records": []}])
)
timestamps = st.one_of(
    st.sampled_from(
        [
            "2020-01-01T00:00:00",  # naive
            "2020-13-01T00:00:00Z",
            "yesterday",
            "",
            "0001-01-01T00:00:00Z",
            "9999-12-31T23:59:59Z",
            "3000-01-01T00:00:00+00:00",
            "1600-06-01T00:00:00Z",
        ]
    ),
    st.integers(-(10**12), 10**12),
    st.floats(allow_nan=False),
    st.booleans(),
    nested,
    non_finite_tokens,
)


@st.composite
def bad_shapes(draw, good: list[dict]):
    """A wrong body shape and the field the error must name."""
    record = good[draw(st.integers(0, len(good) - 1))]
    kind = draw(
        st.sampled_from(
            [
                "not_object",
                "no_records",
                "extra_key",
                "records_type",
                "record_type",
                "empty",
                "too_many",
                "timestamp",
                "deep",
            ]
        )
    )
    if kind == "not_object":
        return draw(top_level_non_objects), "body"
    if kind == "no_records":
        return draw(st.sampled_from([{}, {"rows": [record]}, {"record": record}])), "records"
    if kind == "extra_key":
        name = draw(extra_names.filter(lambda n: n not in ("records", "timestamp")))
        # pydantic cannot even read a top-level key that UTF-8 cannot encode: "body".
        return {"records": [record], name: draw(json_leaves)}, name if _encodable(name) else "body"
    if kind == "records_type":
        value = draw(st.one_of(json_leaves, st.just(record), non_finite_tokens))
        return {"records": value}, "records"
    if kind == "record_type":
        value = draw(st.one_of(json_leaves, st.lists(json_leaves, max_size=3)))
        return {"records": [record, value]}, "records"
    if kind == "empty":
        return {"records": []}, "records"
    if kind == "too_many":
        count = draw(st.integers(MAX_RECORDS + 1, MAX_RECORDS * 3))
        return {"records": [record] * count}, "records"
    if kind == "timestamp":
        return {"records": [record], "timestamp": draw(timestamps)}, "timestamp"
    depth = draw(st.integers(2, 5000))
    return {"records": raw("[" * depth + "]" * depth)}, "records"


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


@FUZZ
@given(data=st.data())
def test_wrong_shapes_get_4xx_naming_the_field(fuzz_service, good_records, data):
    payload, field = data.draw(bad_shapes(good_records))
    before = fuzz_service.store.count()
    response = post(fuzz_service, encode(payload))
    # Nesting past the JSON decoder's recursion limit is unreadable JSON: "body".
    expected = {"body"} if response.status_code == 400 else {field}
    assert_refused(fuzz_service, response, before, expected)


# -- bytes that are not (UTF-8) JSON ---------------------------------------------------


@st.composite
def bad_bytes(draw, good: list[dict]):
    valid = encode({"records": good[:2]})
    kind = draw(st.sampled_from(["truncated", "invalid_utf8", "binary", "blank"]))
    if kind == "truncated":
        return valid[: draw(st.integers(0, len(valid) - 1))]
    if kind == "invalid_utf8":
        at = draw(st.integers(0, len(valid)))
        junk = draw(st.sampled_from([b"\xff", b"\xc3\x28", b"\xed\xa0\x80", b"\x80\x80", b"\xfe"]))
        return valid[:at] + junk + valid[at:]
    if kind == "blank":
        return draw(st.sampled_from([b"", b" ", b"\n\t", b"\x00"]))
    return draw(st.binary(max_size=200))


@FUZZ
@given(data=st.data())
def test_unreadable_bytes_get_4xx_naming_the_body(fuzz_service, good_records, data):
    body = data.draw(bad_bytes(good_records))
    content_type = data.draw(
        st.sampled_from(
            ["application/json", None, "text/plain", "application/json; charset=latin-1"]
        )
    )
    before = fuzz_service.store.count()
    response = post(fuzz_service, body, content_type)
    errors = assert_refused(fuzz_service, response, before)
    if response.status_code == 400:  # not decodable at all: the whole body is named
        assert {e["field"] for e in errors} == {"body"}


def test_explicit_unreadable_bodies(fuzz_service, good_records):
    """The classes above, once each with the exact reason (these were 400s without a
    field, or 500s, before)."""
    cases = {
        b"": (422, "body", "Field required"),
        b'{"records": [' + b"[" * 100_000 + b"]" * 100_000 + b"]}": (413, "body", "larger"),
        b"[" * 20_000 + b"]" * 20_000: (400, "body", "nested too deeply"),
        b'{"records": [{"temperature": ' + b"9" * 5000 + b"}]}": (400, "body", "4300 digits"),
        b'{"records": [{"temperature": "\xff"}]}': (400, "body", "not valid UTF-8"),
        b'{"records": [}': (400, "body", "not valid JSON"),
        b'{"records": [{"\\ud800": 1}]}': (400, "body", "unpaired surrogate (\\ud800)"),
    }
    for body, (status, field, reason) in cases.items():
        before = fuzz_service.store.count()
        response = post(fuzz_service, body)
        assert response.status_code == status, (body[:40], response.text)
        (error,) = assert_refused(fuzz_service, response, before, {field})
        assert reason in error["reason"], error


def test_regressions_found_by_fuzzing(fuzz_service, good_records):
    """Each of these crashed the service (500 or a dropped connection) or was
    accepted before the fixes that came with these tests."""
    good = good_records[0]
    cases = [
        # A JSON \\ud800 escape is an unpaired surrogate: the 422 could not be encoded
        # (a 500); now the body is refused as not Unicode.
        ({"records": [{**good, "\ud800": 1.0}]}, "body"),
        ({"records": [{**good, "\udc00x": "text"}]}, "body"),
        # math.isfinite(10**400) raises OverflowError.
        ({"records": [{**good, "visibility": 10**400}]}, "visibility"),
        # Out of pandas' datetime range: the writer failed the whole group commit (503).
        ({"records": [good], "timestamp": "3000-01-01T00:00:00Z"}, "timestamp"),
        ({"records": [good], "timestamp": "0001-01-01T00:00:00Z"}, "timestamp"),
        # A number (or true) was read as Unix time.
        ({"records": [good], "timestamp": 1_600_000_000}, "timestamp"),
        ({"records": [good], "timestamp": True}, "timestamp"),
        # An empty key was reported as "body", not named.
        ({"records": [good], "": 1}, ""),
    ]
    for payload, field in cases:
        before = fuzz_service.store.count()
        response = post(fuzz_service, encode(payload))
        assert_refused(fuzz_service, response, before, {field})


# -- huge payloads -------------------------------------------------------------------


@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
@given(extra_bytes=st.integers(1, 4 * MAX_BODY), chunked=st.booleans())
def test_bodies_over_the_limit_get_413_before_parsing(
    fuzz_service, good_records, extra_bytes, chunked
):
    filler = "x" * (MAX_BODY + extra_bytes)
    body = encode({"records": [good_records[0]], "padding": filler})
    before = fuzz_service.store.count()
    if chunked:  # no Content-Length: counted while the chunks arrive
        response = post(fuzz_service, iter([body[i : i + 8192] for i in range(0, len(body), 8192)]))
    else:
        response = post(fuzz_service, body)
    assert response.status_code == 413, response.text[:300]
    assert_refused(fuzz_service, response, before, {"body"})


def test_a_body_just_under_the_limit_is_parsed_and_judged(fuzz_service, good_records):
    record = good_records[0]
    padding = "x" * (MAX_BODY - len(encode({"records": [record], "padding": ""})) - 10)
    body = encode({"records": [record], "padding": padding})
    assert MAX_BODY - 20 < len(body) <= MAX_BODY
    before = fuzz_service.store.count()
    response = post(fuzz_service, body)
    assert response.status_code == 422  # read, then refused for the unknown key
    assert_refused(fuzz_service, response, before, {"padding"})


# -- the checkers themselves, without HTTP ---------------------------------------------

any_json_value = st.one_of(
    json_leaves,
    huge_ints,
    st.floats(),  # NaN and infinities included
    nested,
)


@functools.cache
def checkers(features: tuple[str, ...]) -> tuple:
    contract = REPO_ROOT / "data_contracts" / "rainfall.yaml"
    return build_checker(features, contract), build_checker(features, None)


@settings(max_examples=300, deadline=None)
@given(
    record=st.dictionaries(
        st.one_of(st.sampled_from(sorted(CONTRACT.columns)), st.text(max_size=8)),
        any_json_value,
        max_size=12,
    )
)
def test_record_checkers_never_raise_and_flag_what_the_model_cannot_score(registered, record):
    """Whatever a record holds, the checkers return errors rather than raise; and a
    record they accept can be put into the model's float32 matrix as finite numbers."""
    features = registered.features
    for checker in checkers(tuple(features)):
        errors = checker.validate(record)
        if not errors:
            row = np.array(
                [np.nan if record[f] is None else record[f] for f in features], dtype=np.float32
            )
            assert np.isfinite(row[[record[f] is not None for f in features]]).all()
