"""The logged signature declares float32 ``(-1, n_features)`` and rejects a wrong width.

Name: ``signature``. Tasks: all. Needs: signature_inputs, predict, n_features.

A model logged without a signature, or one whose signature is not enforced, accepts
whatever the service is sent. Settings: only ``enabled``.
"""

from __future__ import annotations

import numpy as np

from driftgate.gates.checks.registry import (
    CheckSettings,
    GateCheck,
    GateInputs,
    Predict,
    register,
    timed,
)
from driftgate.gates.result import CheckResult
from driftgate.training.features import TASKS


class SignatureCheck(CheckSettings):
    """Only ``enabled``: the expected signature follows from the model's features."""


def check_signature(
    signature_inputs: list[dict] | None, predict: Predict, n_features: int
) -> CheckResult:
    """The logged signature declares float32 ``(-1, n_features)`` and rejects a wrong width."""

    def run() -> CheckResult:
        if not signature_inputs:
            return CheckResult(
                "signature",
                False,
                "none",
                f"float32 (-1, {n_features})",
                "the model was logged without an input signature",
            )
        spec = signature_inputs[0].get("tensor-spec", {})
        dtype, shape = spec.get("dtype"), tuple(spec.get("shape", ()))
        observed = f"{dtype} {shape}"
        expected = f"float32 (-1, {n_features})"
        if dtype != "float32" or shape != (-1, n_features):
            return CheckResult(
                "signature",
                False,
                observed,
                expected,
                "signature does not match the model's feature contract",
            )
        try:
            predict(np.zeros((2, n_features + 1), dtype=np.float32))
        except Exception:
            return CheckResult("signature", True, observed + ", wrong width rejected", expected)
        return CheckResult(
            "signature",
            False,
            observed + ", wrong width accepted",
            expected,
            f"a ({2}, {n_features + 1}) input was accepted; the signature is not enforced",
        )

    return timed(run)


def _run(inputs: GateInputs, settings: SignatureCheck) -> CheckResult:
    return check_signature(inputs.signature_inputs, inputs.predict, inputs.n_features)


register(
    GateCheck(
        name="signature",
        run=_run,
        applies_to=TASKS,
        settings=SignatureCheck,
        needs=("signature_inputs", "predict", "n_features"),
        summary="the logged signature is float32 (-1, n_features) and enforced",
    )
)
