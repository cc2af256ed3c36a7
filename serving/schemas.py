"""Request and response bodies of the inference service (pydantic models)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any

from pydantic import (
    AwareDatetime,
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictFloat,
    StrictInt,
    StringConstraints,
    ValidationInfo,
    field_validator,
)

from driftgate.stores.control import (
    MAX_EVIDENCE_LINKS,
    MAX_LINK_CHARS,
    MAX_NAME_CHARS,
    MAX_REASON_CHARS,
    evidence_problem,
    text_problem,
    window_problem,
)
from driftgate.stores.samples import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP

# A category may come as text (its name) or as an integer code; a numeric field's text
# is refused by the per-record validation, naming the field. Text is capped: a
# category name is short, and a record is stored as sent.
MAX_CATEGORY_CHARS = 256
CategoryText = Annotated[str, StringConstraints(strict=True, max_length=MAX_CATEGORY_CHARS)]
# A boolean feature's JSON true/false passes the schema; the checker judges each field
# (a boolean for a numeric feature is refused there, naming it).
FeatureValue = StrictBool | StrictFloat | StrictInt | CategoryText | None


class PredictRequest(BaseModel):
    """``{"records": [{feature: number or category, ...}, ...], "timestamp": optional}``."""

    model_config = ConfigDict(extra="forbid")

    records: list[dict[str, FeatureValue]] = Field(min_length=1)
    timestamp: AwareDatetime | None = Field(
        None, description="event time of the records (only if the service accepts it)"
    )

    @field_validator("timestamp", mode="before")
    @classmethod
    def _text_only(cls, value: Any) -> Any:
        # pydantic would read a number (or true) as Unix time, guessing s or ms.
        if value is not None and not isinstance(value, str):
            raise ValueError("must be an ISO 8601 string with a time zone")
        return value

    @field_validator("timestamp")
    @classmethod
    def _storable(cls, value: datetime | None) -> datetime | None:
        # Refused here, not by the store: one unstorable sample would fail the whole
        # group commit, other clients' requests included.
        if value is not None and not EARLIEST_TIMESTAMP <= value < LATEST_TIMESTAMP:
            raise ValueError(
                f"must lie in [{EARLIEST_TIMESTAMP:%Y-%m-%d}, {LATEST_TIMESTAMP:%Y-%m-%d}) UTC"
            )
        return value


class PlainPredictRequest:
    """A :class:`PredictRequest` read by :func:`plain_predict_request`: the same two
    attributes, without pydantic's per-instance bookkeeping (``model_construct`` costs
    ten times this)."""

    __slots__ = ("records", "timestamp")

    def __init__(self, records: list[dict[str, Any]]) -> None:
        self.records = records
        self.timestamp: datetime | None = None


def plain_predict_request(data: Any) -> PlainPredictRequest | None:
    """``data`` as a request without pydantic's per-value validation, when it is
    the common body: ``{"records": [...]}`` alone, each record a mapping of plain JSON
    values that :data:`FeatureValue` keeps as they are (a float, an int, a boolean, a
    null, text of at most MAX_CATEGORY_CHARS characters). Anything else (a timestamp,
    another type, longer text, an empty list) returns None: ``model_validate`` then
    judges it and words its errors. Per record this is one pass over its values."""
    if type(data) is not dict or len(data) != 1:
        return None
    records = data.get("records")
    if type(records) is not list or not records:
        return None
    for record in records:
        if type(record) is not dict:
            return None
        for value in record.values():
            kind = type(value)
            if kind is float or kind is int or kind is bool or value is None:
                continue
            if kind is str and len(value) <= MAX_CATEGORY_CHARS:
                continue
            return None
    return PlainPredictRequest(records)


class PredictResponse(BaseModel):
    """The answer; its output fields follow the model's task (serving/outputs.py):
    binary ``probabilities`` + ``classes`` (0/1); multiclass ``probabilities`` (label ->
    probability per record) + ``classes`` (labels) + ``labels``; regression ``predictions``."""

    request_id: str
    model_name: str
    model_version: str
    task: str | None = Field(None, description="present unless binary")
    probabilities: list[float] | list[dict[str, float]] | None = None
    classes: list[int] | list[str] | None = None
    labels: list[str] | None = None
    predictions: list[float] | None = None
    sample_stored: bool


def _not_blank(value: str) -> str:
    if not value.strip():
        raise ValueError("must not be blank")
    return value


def _storable_time(value: datetime | None) -> datetime | None:
    """A window bound the control store can hold (naive = UTC), else a ValueError."""
    if value is None:
        return None
    aware = value if value.tzinfo is not None else value.replace(tzinfo=UTC)
    try:
        inside = EARLIEST_TIMESTAMP <= aware < LATEST_TIMESTAMP
    except OverflowError:  # e.g. 9999-12-31T23:00-05:00 has no UTC time
        inside = False
    if not inside:
        raise ValueError(
            f"must lie in [{EARLIEST_TIMESTAMP:%Y-%m-%d}, {LATEST_TIMESTAMP:%Y-%m-%d}) UTC"
        )
    return value


# The switch's own rules (driftgate/stores/control.py), checked here as well so that a
# client's 422 names the field; the store enforces them on every other path too.
def _text_rule(limit: int):
    def check(value: str | None) -> str | None:
        if value is not None and (problem := text_problem(value, limit)):
            raise ValueError(problem)
        return value

    return check


def _evidence_rule(links: list[str]) -> list[str]:
    if problem := evidence_problem(links):
        raise ValueError(problem)
    return links


def _after_start(value: datetime | None, info: ValidationInfo) -> datetime | None:
    # window_start is validated first (declared first): absent here if it was refused.
    if problem := window_problem(info.data.get("window_start"), value):
        raise ValueError(problem)
    return value


class PauseRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    reason: str = Field(min_length=1, description=f"at most {MAX_REASON_CHARS} characters")
    by: str | None = Field(None, description="who; default http:<client>")
    monitor: str | None = None
    window_start: datetime | None = None
    window_end: datetime | None = Field(None, description="after window_start")
    evidence: list[str] = Field(
        default_factory=list,
        description=f"at most {MAX_EVIDENCE_LINKS} links of {MAX_LINK_CHARS} characters",
    )
    review_id: str | None = None

    _reason = field_validator("reason")(_not_blank)
    _reason_text = field_validator("reason")(_text_rule(MAX_REASON_CHARS))
    _names = field_validator("by", "monitor", "review_id")(_text_rule(MAX_NAME_CHARS))
    _window = field_validator("window_start", "window_end")(_storable_time)
    _window_order = field_validator("window_end")(_after_start)
    _evidence = field_validator("evidence")(_evidence_rule)


class ResumeRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    reason: str = Field(min_length=1, description=f"at most {MAX_REASON_CHARS} characters")
    by: str | None = None

    _reason = field_validator("reason")(_not_blank)
    _reason_text = field_validator("reason")(_text_rule(MAX_REASON_CHARS))
    _names = field_validator("by")(_text_rule(MAX_NAME_CHARS))
