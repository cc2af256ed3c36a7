"""Contract revision: widen what recent traffic needs, for a person to accept.

When a contract keeps refusing production (the ``rejected_share`` monitor breaching
window after window), either production is broken or the world moved and the contract
did not. Only a person can tell which; :func:`propose_revision` gives them the second
answer ready to accept: the current contract with **only the rules that refused the
recent records** widened, from the recent traffic itself (refused records included),
and every other rule kept as it is. :meth:`Revision.diff_lines` says what changes, one
line per key (``columns.sea_level_pressure.max: 0.81 -> 2.43``).

How each rule that refused records is widened (bounds chosen as ``contract infer``
chooses them, :mod:`.infer`, on the recent traffic):

- ``range``: a bound that received values went past moves out to the bound inferred
  from every received value of the column (robust 0.1%/99.9% quantiles widened by 25%
  of their span, rounded outwards); a bound nothing went past stays, and no bound moves
  inwards. A lone corrupt reading barely moves a quantile, so it stays refused;
- ``categories``: the received values not listed are added (sorted after the listed
  ones, which keep their order: a model's category buckets follow it);
- ``nulls``: ``max_null_share`` becomes the inferred bound of the received null share
  (1.5 times it plus one point), and the column ``nullable``.

Rules no traffic can widen (``dtype``, ``exists``, ``finite``, extra columns, the
model's own rules) are listed in :attr:`Revision.left` with how many records they
refused: those records are broken, or the change needs a person's edit.

The revised contract's ``version`` is the current one's plus one. Nothing here writes:
accepting a revision (``driftgate contract revise``, :mod:`driftgate.jobs.contract_revision`)
writes it beside the current one as ``<name>.v<version>.yaml``
(:mod:`driftgate.config.contract_files`, which also finds the one in effect).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import pandas as pd

from driftgate.data_contracts.infer import (
    DEFAULT_MARGIN,
    DEFAULT_QUANTILE,
    infer_range,
    null_share_bound,
)
from driftgate.data_contracts.model import NUMERIC_DTYPES, ColumnSpec, Contract, rule_kind

# Rule kinds a revision widens from traffic; the other kinds are left for a person.
WIDENED_KINDS = ("range", "categories", "nulls")
# The rule id of a valid record refused because another record of its request was:
# nothing about it to widen.
OTHER_RECORD_RULE = "request.other_record"


@dataclass(frozen=True)
class RuleChange:
    """One key the revision changes, and the rule whose refusals asked for it."""

    key: str  # columns.<column>.<key>
    before: object
    after: object
    rule: str
    records: int  # recent records this rule refused

    def __str__(self) -> str:
        return (
            f"{self.key}: {_shown(self.before)} -> {_shown(self.after)} "
            f"({self.records} refused records broke {self.rule})"
        )


@dataclass(frozen=True)
class LeftRule:
    """A rule that refused recent records and that the revision leaves as it is."""

    rule: str
    records: int
    why: str

    def __str__(self) -> str:
        return f"{self.rule}: {self.records} refused records, not widened ({self.why})"


@dataclass(frozen=True)
class Revision:
    """A proposed contract revision: the current and revised contracts and the diff."""

    current: Contract
    revised: Contract
    changes: tuple[RuleChange, ...]
    left: tuple[LeftRule, ...]
    received: int  # records the proposal was built from, refused ones included
    refused: int

    @property
    def changed(self) -> bool:
        return bool(self.changes)

    def diff_lines(self) -> list[str]:
        """What accepting changes, one line per key, then what it leaves refused."""
        head = (
            f"contract '{self.current.name}' v{self.current.version} -> "
            f"v{self.revised.version}, from {self.received} received records "
            f"({self.refused} refused)"
        )
        if not self.changes:
            head = (
                f"contract '{self.current.name}' v{self.current.version}: nothing to widen "
                f"from {self.received} received records ({self.refused} refused)"
            )
        return [head, *(f"  {change}" for change in self.changes),
                *(f"  {left}" for left in self.left)]  # fmt: skip


def propose_revision(
    contract: Contract,
    received: pd.DataFrame,
    refusals: Mapping[str, int],
    *,
    refused: int = 0,
    margin: float = DEFAULT_MARGIN,
    quantile: float = DEFAULT_QUANTILE,
) -> Revision:
    """The revision of ``contract`` that recent traffic asks for (the module doc).

    Args:
        contract: The contract in effect.
        received: The recent records' columns, accepted and refused ones together (a
            refused record's unparseable value as null).
        refusals: Rule id -> how many of the recent records it refused (a record counts
            once for each rule it broke).
        refused: How many of ``received`` were refused (said in the diff).
        margin: Range widening, as a fraction of the inner quantile span (as
            ``contract infer``).
        quantile: Lower quantile of the ranges (the upper is ``1 - quantile``).
    """
    columns = dict(contract.columns)
    changes: list[RuleChange] = []
    left: list[LeftRule] = []
    for rule, records in sorted(refusals.items()):
        if rule == OTHER_RECORD_RULE or records <= 0:
            continue
        column, kind = _column_of(rule), rule_kind(rule)
        if column is None or column not in columns or kind not in WIDENED_KINDS:
            why = "not a rule of this contract" if column is None or column not in columns else (
                f"a {kind} rule is not widened from data"
            )  # fmt: skip
            left.append(LeftRule(rule, records, why))
            continue
        if column not in received.columns:
            left.append(LeftRule(rule, records, "no received values of the column"))
            continue
        spec = columns[column]
        update = _widened(spec, received[column], kind, margin, quantile)
        found = [
            RuleChange(f"columns.{column}.{key}", getattr(spec, key), value, rule, records)
            for key, value in update.items()
            if getattr(spec, key) != value
        ]
        if not found:
            left.append(LeftRule(rule, records, "the recent values need no wider rule"))
            continue
        columns[column] = ColumnSpec(**{**spec.model_dump(), **update})
        changes.extend(found)
    revised = contract.model_copy(
        update={"columns": columns, "version": contract.version + (1 if changes else 0)}
    )
    # Validated as a loaded file would be: a revision never writes what cannot load.
    revised = Contract.from_yaml(revised.to_yaml(), f"revision of {contract.name}")
    return Revision(
        current=contract,
        revised=revised,
        changes=tuple(changes),
        left=tuple(left),
        received=len(received),
        refused=refused,
    )


def _widened(spec: ColumnSpec, values: pd.Series, kind: str, margin: float, quantile: float):
    """The keys of ``spec`` that let ``values`` through rule ``kind`` (may equal spec's)."""
    if kind == "range" and spec.dtype in NUMERIC_DTYPES:
        numbers = pd.to_numeric(values, errors="coerce").dropna()
        inferred = infer_range(numbers, spec.dtype, margin, quantile) if len(numbers) else {}
        update: dict = {}
        # A bound moves only where received values went past it, and only outwards.
        below = spec.min is not None and bool((numbers < spec.min).any())
        if below and inferred.get("min", spec.min) < spec.min:
            update["min"] = inferred["min"]
        above = spec.max is not None and bool((numbers > spec.max).any())
        if above and inferred.get("max", spec.max) > spec.max:
            update["max"] = inferred["max"]
        return update
    if kind == "categories" and spec.categories is not None:
        listed = set(spec.categories)
        seen = [_category(v, spec.dtype) for v in values.dropna().unique()]
        new = sorted({v for v in seen if v is not None and v not in listed}, key=str)
        return {"categories": [*spec.categories, *new]} if new else {}
    if kind == "nulls":
        share = float(values.isna().mean()) if len(values) else 0.0
        bound = null_share_bound(share)
        if bound <= spec.allowed_null_share:
            return {}
        return {"nullable": True, "max_null_share": bound}
    return {}


def _category(value: object, dtype: str) -> int | bool | str | None:
    """A received value as a category of ``dtype``, or None when it is not one."""
    if dtype == "string":
        return value if isinstance(value, str) else None
    if dtype == "bool":
        return bool(value) if isinstance(value, (bool, np.bool_)) else None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return int(number) if math.isfinite(number) and number == int(number) else None


def _column_of(rule: str) -> str | None:
    """The column of a ``columns.<column>.<kind>`` rule id (None for other rules)."""
    if not rule.startswith("columns.") or rule.count(".") < 2:
        return None
    return rule[len("columns.") : rule.rindex(".")]


def _shown(value: object) -> str:
    return "unset" if value is None else str(value)
