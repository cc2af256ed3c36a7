"""The registry of gate checks, keyed by name.

Every check is one module of :mod:`driftgate.gates.checks`: a pure function, a settings
model (its key under ``model_checks:`` in ``gates.yaml``), the tasks it applies to and
the :class:`GateInputs` it needs, registered at the bottom of the module with
:func:`register`. :func:`run_checks` is the gate's loop over the registry.

Checks run in registration order within their group: ``data`` checks before the metric
gates, ``model_checks`` after them. Unknown names fail with :class:`UnknownCheckError`,
which lists the known ones.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
from pydantic import ConfigDict, ValidationError, create_model
from pydantic_core import InitErrorDetails, PydanticCustomError

from driftgate.core.yamlconfig import StrictModel
from driftgate.gates.result import CheckResult, not_applicable
from driftgate.training.evaluate import DECISION_THRESHOLD

if TYPE_CHECKING:
    from torch import nn

Predict = Callable[[np.ndarray], np.ndarray]
Group = Literal["data", "model_checks"]
GROUPS: tuple[Group, ...] = ("data", "model_checks")


class UnknownCheckError(KeyError):
    """A check name that is not registered; the message lists the known names."""

    def __str__(self) -> str:  # KeyError would print the repr of the message
        return str(self.args[0])


class CheckSettings(StrictModel):
    """Base of every check's settings: each can be switched off in ``gates.yaml``."""

    enabled: bool = True


class _NotGiven:
    """An input the caller did not provide (``None`` is a value: "no contract")."""

    def __repr__(self) -> str:
        return "NOT_GIVEN"


NOT_GIVEN: Any = _NotGiven()


@dataclass(frozen=True)
class NotApplicable:
    """An input that does not exist for this candidate, and why (a model adopted from
    elsewhere has no state dict to rebuild it from). A check that needs it is reported
    as not applicable: not a pass, not a failure (:func:`run_checks`)."""

    reason: str


@dataclass(frozen=True)
class GateInputs:
    """What the gate knows about a candidate; each check reads the fields it ``needs``.

    A field the candidate cannot have is a :class:`NotApplicable` (an adopted model's
    ``model``, ``rebuild``...): the checks needing it are reported not applicable.

    Attributes:
        task: The model's task (``binary``, ``multiclass``, ``regression``); checks that
            do not apply are skipped.
        predict: The registered model's predict (what serving loads): float32 rows ->
            the task's output (P(class 1) ``(n,)``, class probabilities ``(n, K)``, or
            values ``(n,)``).
        model: The candidate rebuilt from its logged weights (a ``torch.nn.Module``).
        rebuild: A fresh, untrained module of the candidate's architecture.
        rows: Held-out feature rows.
        lower: Per-feature lower bounds of valid inputs (contract, else training range).
        upper: Per-feature upper bounds.
        probabilities: The candidate's outputs on ``rows`` (the task's shape).
        decision_threshold: Binary: P(class 1) at or above which the service answers 1.
        n_outputs: Output columns: the number of classes for multiclass, else 1.
        n_features: Number of input features.
        signature_inputs: The logged input signature (MLflow's JSON form), or None.
        train_metrics: Metrics recorded on the training split (``roc_auc``...).
        val_metrics: Metrics recorded on the validation split.
        recorded_environment: Package versions recorded at training.
        current_environment: Package versions of this environment.
        contract_result: The reference period's contract result, None without a contract.
        recorded_data_digest: Training-data digest recorded on the candidate.
        data_digest: Digest of the configured data's training split.
        judged_slice: What ``judged_targets`` are: the recent slice (``promotion.recent``,
            the newest labelled production rows) when the gate has one, else the
            configured held-out split; said in the report.
        judged_targets: Those rows' labels, encoded (binary 0/1, the class index, the value).
        judged_outputs: The candidate's outputs on them (the task's shape).
        settings: Every check's validated settings by name (a check held to another
            check's bar reads it here).
        export_dir: Where a check writes files that belong with the version (the ONNX
            export); None: nothing is kept.
    """

    task: str = "binary"
    predict: Predict = NOT_GIVEN
    model: nn.Module = NOT_GIVEN
    rebuild: Callable[[], nn.Module] = NOT_GIVEN
    rows: np.ndarray = NOT_GIVEN
    lower: np.ndarray = NOT_GIVEN
    upper: np.ndarray = NOT_GIVEN
    probabilities: np.ndarray = NOT_GIVEN
    decision_threshold: float = DECISION_THRESHOLD
    n_outputs: int = 1
    n_features: int = NOT_GIVEN
    signature_inputs: list[dict] | None = NOT_GIVEN
    train_metrics: Mapping[str, float] = NOT_GIVEN
    val_metrics: Mapping[str, float] = NOT_GIVEN
    recorded_environment: Mapping[str, str] = NOT_GIVEN
    current_environment: Mapping[str, str] = NOT_GIVEN
    contract_result: Any = NOT_GIVEN
    recorded_data_digest: str = NOT_GIVEN
    data_digest: str = NOT_GIVEN
    judged_slice: str = NOT_GIVEN
    judged_targets: np.ndarray = NOT_GIVEN
    judged_outputs: np.ndarray = NOT_GIVEN
    settings: Mapping[str, CheckSettings] = field(default_factory=dict)
    export_dir: Path | None = None


INPUT_NAMES = frozenset(f.name for f in fields(GateInputs))


@dataclass(frozen=True)
class GateCheck:
    """A registered check.

    Attributes:
        name: Registry key and the check's key under ``model_checks:``.
        run: ``(inputs, settings) -> CheckResult | list[CheckResult]``; ``settings`` is
            None for a check without settings.
        settings: Its settings model (a :class:`CheckSettings`); None for a check that
            is always on and has nothing to configure.
        needs: The :class:`GateInputs` fields ``run`` reads.
        applies_to: Tasks it applies to (``binary``, ``multiclass``, ``regression``).
        group: ``data`` (before the metric gates) or ``model_checks`` (after them).
        summary: One line for the docs and the list of known checks.
    """

    name: str
    run: Callable[..., CheckResult | list[CheckResult]]
    settings: type[CheckSettings] | None
    needs: tuple[str, ...]
    applies_to: tuple[str, ...] = ("binary",)
    group: Group = "model_checks"
    summary: str = ""

    def applies(self, task: str) -> bool:
        return task in self.applies_to


CHECKS: dict[str, GateCheck] = {}


def register(check: GateCheck) -> GateCheck:
    """Add a check to the registry (one call at the bottom of each check module)."""
    # The name is a key of gates.yaml and an attribute of the loaded ModelChecks, so it
    # may not shadow what that model already has (``settings()``, pydantic's ``model_*``).
    if not check.name.isidentifier() or check.name == "settings" or check.name.startswith("model_"):
        raise ValueError(
            f"gate check {check.name!r}: the name must be an identifier, not 'settings' "
            "and not starting with 'model_'"
        )
    if check.name in CHECKS:
        raise ValueError(f"gate check {check.name!r} is already registered")
    if check.group not in GROUPS:
        raise ValueError(f"gate check {check.name!r}: group must be one of {list(GROUPS)}")
    unknown = sorted(set(check.needs) - INPUT_NAMES)
    if unknown:
        raise ValueError(
            f"gate check {check.name!r} needs unknown inputs {unknown}; "
            f"GateInputs has {sorted(INPUT_NAMES)}"
        )
    if check.settings is not None and not issubclass(check.settings, CheckSettings):
        raise ValueError(f"gate check {check.name!r}: settings must subclass CheckSettings")
    if not check.applies_to:
        raise ValueError(f"gate check {check.name!r} applies to no task")
    CHECKS[check.name] = check
    return check


def unregister(name: str) -> GateCheck:
    """Remove a check (for tests that register their own)."""
    return CHECKS.pop(name)


def get_check(name: str) -> GateCheck:
    """The registered check called ``name``.

    Raises:
        UnknownCheckError: No such check; the message lists the known names.
    """
    try:
        return CHECKS[name]
    except KeyError:
        raise UnknownCheckError(
            f"unknown gate check {name!r}; known checks: {list(CHECKS)}"
        ) from None


def configurable_checks() -> list[str]:
    """Names that may appear under ``model_checks:``, in run order."""
    return [name for name, check in CHECKS.items() if check.settings is not None]


def validate_check_settings(data: object) -> dict[str, CheckSettings]:
    """``model_checks:`` of ``gates.yaml`` validated against the registry.

    Each known check's settings are validated by its own model (defaults for a check
    not mentioned); an unknown key fails naming it and listing the known checks. Every
    problem comes back in one ValidationError, located relative to ``model_checks``.
    """
    known = configurable_checks()
    model = create_model(
        "ModelChecks",
        __config__=ConfigDict(extra="forbid", allow_inf_nan=False),
        **{name: (CHECKS[name].settings, CHECKS[name].settings()) for name in known},
    )
    if not isinstance(data, Mapping):
        return dict(model.model_validate(data))  # pydantic says what it should be
    problems = [_unknown_check(key, data[key], known) for key in data if key not in known]
    try:
        settings = dict(model.model_validate({k: v for k, v in data.items() if k in known}))
    except ValidationError as exc:
        problems += [
            InitErrorDetails(type=e["type"], loc=e["loc"], input=e["input"], ctx=e.get("ctx", {}))
            for e in exc.errors(include_url=False)
        ]
    if problems:
        raise ValidationError.from_exception_data("ModelChecks", problems)
    return settings


def _unknown_check(key: object, value: object, known: list[str]) -> InitErrorDetails:
    always_on = isinstance(key, str) and key in CHECKS
    message = (
        "gate check {name} is always on and has no settings"
        if always_on
        else "unknown gate check {name}; known checks: {known}"
    )
    return InitErrorDetails(
        type=PydanticCustomError(
            "unknown_check", message, {"name": repr(key), "known": ", ".join(known)}
        ),
        loc=(str(key),),
        input=value,
    )


def settings_of(check: GateCheck, settings: Mapping[str, CheckSettings]) -> CheckSettings | None:
    """The check's configured settings; its defaults when registered after loading."""
    if check.settings is None:
        return None
    return settings.get(check.name) or check.settings()


def run_checks(group: Group, inputs: GateInputs) -> list[CheckResult]:
    """Every enabled check of ``group`` that applies to ``inputs.task``, in order.

    A check whose inputs were not provided fails with the names of the missing inputs
    rather than being skipped: a gate that silently ran fewer checks would pass more.
    A check that needs an input the gate marked :class:`NotApplicable` is reported as
    not applicable, with the reason (never as a pass).
    """
    results: list[CheckResult] = []
    for check in [c for c in CHECKS.values() if c.group == group]:
        if not check.applies(inputs.task):
            continue
        settings = settings_of(check, inputs.settings)
        if settings is not None and not settings.enabled:
            continue
        absent = [getattr(inputs, n) for n in check.needs]
        reasons = list(dict.fromkeys(a.reason for a in absent if isinstance(a, NotApplicable)))
        if reasons:
            results.append(not_applicable(check.name, "; ".join(reasons), group=group))
            continue
        missing = [name for name in check.needs if getattr(inputs, name) is NOT_GIVEN]
        if missing:
            results.append(
                CheckResult(
                    check.name,
                    False,
                    "inputs missing",
                    "-",
                    f"the gate did not provide {', '.join(missing)}",
                    group=group,
                )
            )
            continue
        outcome = check.run(inputs, settings)
        results.extend(outcome if isinstance(outcome, list) else [outcome])
    return results


def timed(check: Callable[[], CheckResult]) -> CheckResult:
    """Run ``check`` and record its wall time in the result."""
    started = time.perf_counter()
    result = check()
    return CheckResult(**{**result.__dict__, "seconds": time.perf_counter() - started})
