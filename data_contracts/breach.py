"""The error raised when data that must honour its contract does not."""

from __future__ import annotations

from driftgate.core.errors import EXIT_CHECK_FAILED, DriftgateError
from driftgate.data_contracts.batch import ContractResult
from driftgate.data_contracts.render import render_markdown


class ContractBreach(DriftgateError):
    """Data breaks its contract; ``report`` (Markdown) lists every broken rule."""

    exit_code = EXIT_CHECK_FAILED

    def __init__(self, source: str, result: ContractResult) -> None:
        self.result = result
        self.report = render_markdown(result)
        failures = "; ".join(f"{r.rule}: {r.message}" for r in result.failures)
        super().__init__(f"{source}: data breaks contract '{result.contract}': {failures}")
