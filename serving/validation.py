"""Per-record validation of prediction requests, behind one small interface.

The service asks a :class:`RecordChecker` for the broken fields of each record. The
contract's :class:`data_contracts.RecordValidator` is used when the project has a
contract; the model's own needs (every feature present, a finite number) are checked
in any case, because a contract may tolerate what the model cannot score, and a
model may be served without a contract.

Both checkers first try a precompiled acceptance (:class:`PlainRecordCheck`): a record
holding exactly the model's features, each a plain number inside every bound that any
rule sets, is valid whatever the rules say, and is accepted in one pass over its
values. Every other record (a null, a category, a value out of a range, a missing or
extra field) goes through the rules, which name what is wrong: the fast path only ever
answers "valid", so every refusal keeps its words.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple, Protocol

from driftgate.training.features import FeatureSpec


class FieldError(NamedTuple):
    """One broken field of one record: what the 422 response lists."""

    field: str
    reason: str
    rule: str = ""


class RecordChecker(Protocol):
    """Anything that lists the broken fields of a record ([] when it is valid)."""

    def validate(self, record: Mapping[str, Any]) -> Sequence[FieldError]: ...

    def normalise(self, records: list[dict]) -> list[dict]:
        """The records as they will be scored and stored (e.g. a code read as its text)."""
        ...


class PlainRecordCheck:
    """Accepts a record that no rule can refuse, in one pass: its keys are exactly
    ``bounds``' names, and each value's exact type is one of its field's ``types`` and
    lies in ``[low, high]`` (NaN compares false: refused here, judged by the rules).

    Args:
        bounds: Field name -> (exact types accepted, low, high), the intersection of
            every rule on that field; built by :func:`plain_bounds`.
    """

    __slots__ = ("fields", "keys")

    def __init__(self, bounds: Mapping[str, tuple[tuple[type, ...], float, float]]) -> None:
        self.keys = frozenset(bounds)
        self.fields = tuple((name, *rule) for name, rule in bounds.items())

    def __call__(self, record: Mapping[str, Any]) -> bool:
        if record.keys() != self.keys:
            return False
        for name, types, low, high in self.fields:
            value = record[name]
            if type(value) not in types or not low <= value <= high:
                return False
        return True


def plain_bounds(
    features: Sequence[str], contract: Any = None
) -> dict[str, tuple[tuple[type, ...], float, float]] | None:
    """Per feature, the plain numbers every rule accepts (see :class:`PlainRecordCheck`):
    a finite float or int within float32's range (the model checker), and within the
    contract column's type and range. None when no record is plain (a feature the
    contract may refuse by other rules: categories, a non-numeric type; a feature the
    contract forbids as extra; a required contract column that is no feature)."""
    bounds = {}
    for name in features:
        types: tuple[type, ...] = (float, int)  # bool is neither: type(), not isinstance
        low, high = -FLOAT32_MAX, FLOAT32_MAX
        spec = None if contract is None else contract.columns.get(name)
        if spec is not None:
            if spec.dtype == "int":
                types = (int,)
            elif spec.dtype != "float":
                return None
            if spec.categories is not None:
                return None
            low = max(low, spec.min if spec.min is not None else low)
            high = min(high, spec.max if spec.max is not None else high)
        elif contract is not None and contract.extra_columns == "forbid":
            return None
        bounds[name] = (types, low, high)
    if contract is not None and any(
        spec.required and name not in bounds for name, spec in contract.columns.items()
    ):
        return None
    return bounds


class FeatureChecker:
    """The model's needs: each feature present and a finite number (not a bool).

    Args:
        features: The model version's features.
        allow_extra: Accept fields the model does not use (they are stored with the
            sample). Without a contract, extras are refused: a typo such as
            ``temprature`` must not pass silently while ``temperature`` is missing.
    """

    def __init__(
        self,
        features: Sequence[str],
        allow_extra: bool = False,
        nullable: Sequence[str] = (),
        categorical: Sequence[str] = (),
        boolean: Sequence[str] = (),
        boolean_as_text: Sequence[str] = (),
    ) -> None:
        self.features = tuple(features)
        self._known = frozenset(features)
        # Categorical features take a category's text or an integer code.
        self.categorical = frozenset(categorical) - frozenset(boolean)
        # Boolean features (categories false/true) take every common spelling of a
        # boolean and are normalised to one: a JSON boolean, or the text "true"/"false"
        # where the contract types the column as text.
        self.boolean = frozenset(boolean)
        self.boolean_as_text = frozenset(boolean_as_text) & self.boolean
        self.allow_extra = allow_extra
        # Features whose null (JSON null) the model may score: driftgate models impute a
        # missing input (training mean, plus the indicator of a feature missing in
        # training). NaN and infinities stay refused.
        self.nullable = frozenset(nullable)
        # The precompiled acceptance: all-numeric models only (a category or a boolean
        # takes several spellings and is normalised first).
        numeric = not self.categorical and not self.boolean
        bounds = plain_bounds(self.features) if numeric else None
        self.plain = PlainRecordCheck(bounds) if bounds is not None else None

    def normalise(self, records: list[dict]) -> list[dict]:
        """Records as scored and stored: each boolean feature in its one encoding
        (``"True"`` or ``1`` was scored as an unseen category); the rest as received."""
        if not self.boolean:
            return records
        return [_canonical_booleans(r, self.boolean, self.boolean_as_text) for r in records]

    def validate(self, record: Mapping[str, Any]) -> list[FieldError]:
        if self.plain is not None and self.plain(record):
            return []
        errors = []
        for name in self.features:
            if name not in record:
                errors.append(FieldError(name, "missing: required by the model", "model.feature"))
                continue
            value = record[name]
            if value is None:
                if name not in self.nullable:
                    errors.append(FieldError(name, "null not allowed", "model.feature"))
            elif name in self.boolean:
                canonical = (
                    isinstance(value, str) and value in BOOLEAN_CATEGORIES
                    if name in self.boolean_as_text
                    else isinstance(value, bool)
                )  # what normalise() makes of every spelling; anything else is refused
                if not canonical:
                    errors.append(FieldError(name, _not_boolean(value), "model.feature"))
            elif name in self.categorical:
                if isinstance(value, bool) or not isinstance(value, str | int):
                    errors.append(
                        FieldError(
                            name,
                            f"expected a category (text or integer code), got "
                            f"{type(value).__name__}",
                            "model.feature",
                        )
                    )
            elif isinstance(value, bool) or not isinstance(value, int | float):
                errors.append(
                    FieldError(
                        name, f"expected a number, got {type(value).__name__}", "model.feature"
                    )
                )
            elif (problem := _unscorable(value)) is not None:
                errors.append(FieldError(name, problem, "model.feature"))
        if not self.allow_extra:
            errors.extend(
                FieldError(str(name), "not a feature of the model", "model.extra_field")
                for name in sorted(record.keys() - self._known, key=str)
            )
        return errors


# A feature trained on booleans has these categories (training.features.category_key).
BOOLEAN_CATEGORIES = frozenset({"false", "true"})
BOOLEAN_SPELLINGS = 'true/false, "true"/"false" in any case, or 0/1'


def read_boolean(value: Any) -> bool | None:
    """``value`` as a boolean if it is a common spelling of one, else None."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.lower() in BOOLEAN_CATEGORIES:
        return value.lower() == "true"
    return None


def _not_boolean(value: Any) -> str:
    return f"expected a boolean ({BOOLEAN_SPELLINGS}), got {value!r:.40}"


def _canonical_booleans(record: dict, fields: frozenset[str], as_text: frozenset[str]) -> dict:
    changed = None
    for name in fields:
        value = record.get(name)
        flag = None if value is None else read_boolean(value)
        if flag is None:
            continue  # absent, null or not a boolean: validate() names it
        canonical = ("true" if flag else "false") if name in as_text else flag
        if canonical is not value:
            changed = changed or dict(record)
            changed[name] = canonical
    return changed or record


# The model scores float32: a finite float64 or a Python int beyond this becomes inf.
FLOAT32_MAX = 3.4028234663852886e38


def _unscorable(value: int | float) -> str | None:
    """Why a number cannot be a model input (non-finite, or past float32), else None."""
    try:
        number = float(value)
    except OverflowError:  # a Python int past float64 (JSON allows 4300 digits)
        return f"value {value!r:.40} too large for the model's float32 input"
    if not math.isfinite(number):
        return f"non-finite value {value!r}"
    if abs(number) > FLOAT32_MAX:
        return f"value {value!r:.40} too large for the model's float32 input"
    return None


class ContractChecker:
    """The contract's record rules, then the model's, one reason per field.

    ``text_categories``: categorical features the contract types ``string``; an
    integer code sent for one (``3`` for the category ``"3"``) is read as its text
    before the rules run, so it is judged, scored and stored as the category it is.
    """

    def __init__(
        self,
        contract_validator: Any,
        model_checker: FeatureChecker,
        text_categories: Sequence[str] = (),
        plain: PlainRecordCheck | None = None,
    ) -> None:
        self.contract_validator = contract_validator
        self.model_checker = model_checker
        self.text_categories = tuple(text_categories)
        # Records valid under both the contract and the model, accepted in one pass
        # (:func:`plain_bounds` of the contract); None: every record takes the rules.
        self.plain = plain

    def normalise(self, records: list[dict]) -> list[dict]:
        records = self.model_checker.normalise(records)
        if not self.text_categories:
            return records
        return [_as_text(record, self.text_categories) for record in records]

    def validate(self, record: Mapping[str, Any]) -> list[FieldError]:
        if self.plain is not None and self.plain(record):
            return []
        model_errors = self.model_checker.validate(record)
        # A value that is no spelling of a boolean gets the message that lists the
        # spellings, not the contract's bare "expected bool, got str".
        errors = [e for e in model_errors if e.field in self.model_checker.boolean]
        reported = {e.field for e in errors}
        errors.extend(
            FieldError(e.field, e.reason, e.rule)
            for e in self.contract_validator.validate(record)
            if e.field not in reported
        )
        reported = {e.field for e in errors}
        errors.extend(e for e in model_errors if e.field not in reported)
        return errors


def _as_text(record: dict, fields: Sequence[str]) -> dict:
    changed = None
    for name in fields:
        value = record.get(name)
        if isinstance(value, int) and not isinstance(value, bool):
            changed = changed or dict(record)
            changed[name] = str(value)
    return changed or record


def build_checker(
    features: Sequence[str] | Sequence[FeatureSpec], contract_path: str | Path | None
) -> RecordChecker:
    """The checker for a model version: contract plus model rules, or model rules only.

    ``features`` are the version's feature names or specs (categorical features then
    accept a category's text or an integer code).
    """
    specs = [f if isinstance(f, FeatureSpec) else FeatureSpec(str(f)) for f in features]
    names = [spec.name for spec in specs]
    categorical = [spec.name for spec in specs if spec.kind == "categorical"]
    boolean = [
        spec.name
        for spec in specs
        if spec.kind == "categorical" and set(spec.categories) <= BOOLEAN_CATEGORIES
        and spec.categories
    ]  # fmt: skip
    if contract_path is None:
        # Without a contract, a feature the model learnt missing values for takes null.
        learnt = [spec.name for spec in specs if spec.missing]
        return FeatureChecker(
            names, allow_extra=False, nullable=learnt, categorical=categorical, boolean=boolean
        )
    from driftgate.data_contracts import Contract, RecordValidator

    contract = Contract.load(contract_path)
    # A column whose contract tolerates some nulls takes a null record (the share is a
    # batch rule); one never missing in training (nullable: false) still refuses it.
    nullable = [
        name
        for name, spec in contract.columns.items()
        if spec.nullable is True or spec.allowed_null_share > 0
    ]
    text = [
        name
        for name in categorical
        if name in contract.columns and contract.columns[name].dtype == "string"
    ]
    # One encoding per column, the contract's type: a boolean column the contract types
    # as text ("true"/"false" in a CSV) keeps text; otherwise a JSON boolean.
    checker = FeatureChecker(
        names, allow_extra=True, nullable=nullable, categorical=categorical,
        boolean=boolean, boolean_as_text=[name for name in boolean if name in text],
    )  # fmt: skip
    bounds = plain_bounds(names, contract) if checker.plain is not None else None
    return ContractChecker(
        RecordValidator.from_contract(contract),
        checker,
        text_categories=[name for name in text if name not in boolean],
        plain=PlainRecordCheck(bounds) if bounds is not None else None,
    )
