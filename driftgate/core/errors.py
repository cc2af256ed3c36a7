"""One error base class for every failure driftgate raises on purpose.

Each subclass says which CLI exit code it maps to, so ``driftgate.cli`` turns any
expected failure into a message and its code instead of a traceback:
``1`` a check failed, ``2`` bad usage, configuration or input, ``3`` a store or the
registry failed.
"""

from __future__ import annotations

EXIT_CHECK_FAILED = 1
EXIT_USAGE = 2
EXIT_BACKEND = 3


class DriftgateError(Exception):
    """Base of driftgate's own errors; ``exit_code`` is what the CLI exits with."""

    exit_code: int = EXIT_USAGE
