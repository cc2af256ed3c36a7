"""One error base class for every failure driftgate raises on purpose.

Each subclass says which CLI exit code it maps to, so ``driftgate.cli`` turns any
expected failure into a message and its code instead of a traceback:
``1`` a check failed, ``2`` bad usage, configuration or input, ``3`` a store or the
registry failed. Their messages never hold credentials (see
:mod:`driftgate.core.redaction`).
"""

from __future__ import annotations

from driftgate.core.redaction import redact_credentials

EXIT_CHECK_FAILED = 1
EXIT_USAGE = 2
EXIT_BACKEND = 3


class DriftgateError(Exception):
    """Base of driftgate's own errors; ``exit_code`` is what the CLI exits with."""

    exit_code: int = EXIT_USAGE

    def __init__(self, *args: object) -> None:
        # Messages quote URLs and third-party errors (a driver's connection string, a
        # server's request URL): mask their credentials once, where every error is made.
        super().__init__(*(redact_credentials(a) if isinstance(a, str) else a for a in args))
