"""Data contracts: one YAML promise per data set, enforced in training, monitoring, serving.

- :class:`Contract` (``Contract.load(path)``, ``contract.to_yaml()``) and
  :func:`infer_contract` to scaffold one from data;
- :func:`validate_batch` compiles the contract to a Great Expectations suite and returns
  a :class:`ContractResult` with one :class:`RuleResult` per rule;
- :class:`RecordValidator` checks single records for the inference service, with the
  same row-level semantics and without GX;
- :func:`render_markdown` / :func:`render_html` for people.

Importing this package does not import Great Expectations (it takes seconds); only
:func:`validate_batch` does, on first call.
"""

from driftgate.data_contracts.batch import ContractResult, RuleResult, validate_batch
from driftgate.data_contracts.infer import infer_contract
from driftgate.data_contracts.model import (
    RULE_KINDS,
    ColumnSpec,
    Contract,
    RowCountSpec,
    Rule,
    rule_id,
)
from driftgate.data_contracts.record import RecordError, RecordValidator
from driftgate.data_contracts.render import render_html, render_markdown

__all__ = [
    "RULE_KINDS",
    "ColumnSpec",
    "Contract",
    "ContractResult",
    "RecordError",
    "RecordValidator",
    "RowCountSpec",
    "Rule",
    "RuleResult",
    "infer_contract",
    "render_html",
    "render_markdown",
    "rule_id",
    "validate_batch",
]
