"""What a registry failure raises, and the one wrapper that turns MLflow's errors into it.

Every message passes through :func:`driftgate.core.redaction.redact_credentials`:
MLflow quotes the URL it failed on, and a tracking URI may carry ``user:password@``.
"""

from __future__ import annotations

from driftgate.core.errors import EXIT_BACKEND, EXIT_USAGE, DriftgateError
from driftgate.core.redaction import redact_credentials


class RegistryError(DriftgateError, RuntimeError):
    """The tracking store or registry refused or failed an operation.

    The message never holds credentials: MLflow quotes the URL it failed on, and a
    tracking URI may carry ``user:password@``.
    """

    exit_code = EXIT_BACKEND

    def __init__(self, message: str) -> None:
        super().__init__(redact_credentials(str(message)))


class UnknownModelError(DriftgateError, LookupError):
    """The model, version or run given on the command line is not in the registry (exit 2)."""

    exit_code = EXIT_USAGE

    def __init__(self, message: str) -> None:
        super().__init__(redact_credentials(str(message)))


class MissingArtifactError(RegistryError):
    """A version lacks an artifact something needs (the ONNX model for the onnxruntime
    serving backend); the message names the artifact and how it is made."""


def registry_call(what: str, call, *args, **kwargs):
    """Run one registry call; any failure becomes a RegistryError saying what failed."""
    try:
        return call(*args, **kwargs)
    except RegistryError:
        raise
    except Exception as exc:  # MlflowException, connection errors, timeouts...
        message = getattr(exc, "message", None) or str(exc)
        raise RegistryError(f"{what}: {message}") from exc


def is_missing(exc: Exception) -> bool:
    """Whether MLflow's error says the model, version or run does not exist."""
    return getattr(exc, "error_code", "") in ("RESOURCE_DOES_NOT_EXIST", "INVALID_PARAMETER_VALUE")
