"""The versions recorded at training match this (serving) environment at ``level``.

Name: ``environment``. Tasks: all. Needs: recorded_environment, current_environment.

Threshold: the same ``major``, ``minor`` or ``patch`` release of each package in
``require_same``; a version not recorded at training fails. A model torch does not run
(adopted in a format whose ``runs_on_torch`` is False, such as ONNX: ``driftgate adopt``
records ``model_format: NAME`` for exactly those) has its torch entry reported as not
applicable, never compared nor passed as matching.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Literal

from pydantic import Field

from driftgate.gates.checks.registry import (
    CheckSettings,
    GateCheck,
    GateInputs,
    register,
    timed,
)
from driftgate.gates.result import CheckResult
from driftgate.training.features import TASKS

_LEVELS = {"major": 1, "minor": 2, "patch": 3}


class EnvironmentCheck(CheckSettings):
    require_same: list[Literal["python", "torch"]] = Field(default=["python", "torch"])
    level: Literal["major", "minor", "patch"] = "minor"


def _release(version: str, parts: int) -> tuple[str, ...]:
    numbers = re.findall(r"\d+", version.split("+")[0])
    return tuple(numbers[:parts])


def check_environment(
    recorded: Mapping[str, str], current: Mapping[str, str], settings: EnvironmentCheck
) -> CheckResult:
    """The versions recorded at training match the serving environment at ``level``."""

    def run() -> CheckResult:
        parts = _LEVELS[settings.level]
        mismatches, observed = [], []
        for package in settings.require_same:
            # Any recorded format, not one by name: adopt records it only for a format
            # torch does not run, so a new such format needs no line here.
            if package == "torch" and (model_format := recorded.get("model_format")):
                observed.append(f"torch not applicable ({model_format}: not run by torch)")
                continue
            built, here = recorded.get(package), current.get(package)
            observed.append(f"{package} {built or '?'} vs {here or '?'}")
            if built is None:
                mismatches.append(f"{package} version was not recorded at training")
            elif here is None or _release(built, parts) != _release(here, parts):
                mismatches.append(f"{package} {built} (trained) vs {here} (here)")
        ok = not mismatches
        return CheckResult(
            "environment",
            ok,
            "; ".join(observed),
            f"same {settings.level} release",
            "; ".join(mismatches),
        )

    return timed(run)


def _run(inputs: GateInputs, settings: EnvironmentCheck) -> CheckResult:
    return check_environment(inputs.recorded_environment, inputs.current_environment, settings)


register(
    GateCheck(
        name="environment",
        run=_run,
        applies_to=TASKS,
        settings=EnvironmentCheck,
        needs=("recorded_environment", "current_environment"),
        summary="python and torch recorded at training match this environment",
    )
)
