"""The candidate was trained on the data version evaluated here.

Name: ``data_version``. Group: data (before the metric gates). Tasks: all.
Needs: recorded_data_digest, data_digest. Always on, no settings: with another data
version, "held-out" rows may be rows the candidate was trained on.
"""

from __future__ import annotations

from driftgate.gates.checks.registry import GateCheck, GateInputs, register
from driftgate.gates.result import CheckResult
from driftgate.training.features import TASKS


def check_data_version(recorded_digest: str, digest: str) -> CheckResult:
    """The training-data digest recorded on the candidate equals ``digest``."""
    same_data = recorded_digest == digest
    return CheckResult(
        "data_version",
        same_data,
        recorded_digest[:12],
        f"== {digest[:12]}",
        ""
        if same_data
        else "the candidate was trained on a different data version than "
        "the one configured; held-out rows may overlap its training rows",
        group="data",
    )


def _run(inputs: GateInputs, settings: None) -> CheckResult:
    return check_data_version(inputs.recorded_data_digest, inputs.data_digest)


register(
    GateCheck(
        name="data_version",
        run=_run,
        applies_to=TASKS,
        settings=None,
        needs=("recorded_data_digest", "data_digest"),
        group="data",
        summary="the candidate was trained on the configured data version",
    )
)
