"""The promotion job: evaluate every gate on a candidate, record it, move the aliases.

``driftgate promote`` (CI) and the Prefect flow ``validate_and_promote`` call these
functions. No Prefect here, and no MLflow outside :mod:`driftgate.registry`.
"""

from __future__ import annotations

import contextlib
import logging
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

from driftgate import registry
from driftgate.config import ProjectConfig
from driftgate.core.yamlconfig import ConfigError
from driftgate.environment import describe_environment
from driftgate.gates.checks import GateInputs, run_checks
from driftgate.gates.config import GateConfig
from driftgate.gates.metrics import evaluate_metric_gate
from driftgate.gates.result import CheckResult, GateResult
from driftgate.jobs.data import PreparedData, prepare_data
from driftgate.training.data import feature_matrix
from driftgate.training.evaluate import METRIC_NAMES, classification_metrics
from driftgate.training.model import TabularClassifier

log = logging.getLogger(__name__)

SPLITS = {"val": "validation", "test": "test"}
# The task of every model driftgate trains today; checks declare the tasks they apply to.
TASK = "binary"


@dataclass(frozen=True)
class PromotionOutcome:
    result: GateResult
    promoted: bool
    previous_champion: str | None
    report_files: dict[str, Path]


def _rebuild(architecture: dict, state: dict) -> TabularClassifier:
    model = TabularClassifier(**architecture)
    model.load_state_dict(state)
    return model.eval()


def _metrics_on(predict, frame, data: PreparedData) -> tuple[np.ndarray, dict[str, float]]:
    """Held-out metrics; NaN metrics (failing their gates) when predictions are not finite,
    so a broken model is reported by the gate instead of crashing it."""
    probabilities = np.asarray(predict(feature_matrix(frame, data.specs)), np.float64).ravel()
    if not np.isfinite(probabilities).all():
        return probabilities, dict.fromkeys(METRIC_NAMES, float("nan"))
    return probabilities, classification_metrics(frame[data.target], probabilities)


def _bounds(data: PreparedData) -> tuple[np.ndarray, np.ndarray]:
    """Per-feature bounds of valid inputs: the data contract's min/max, else the
    training data's observed range for features the contract leaves open."""
    from driftgate.data_contracts import Contract

    train = feature_matrix(data.splits.train, data.specs)
    lower, upper = train.min(axis=0), train.max(axis=0)
    if data.contract_path is not None:
        columns = Contract.load(data.contract_path).columns
        for index, feature in enumerate(data.features):
            spec = columns.get(feature)
            if spec is not None and spec.min is not None:
                lower[index] = spec.min
            if spec is not None and spec.max is not None:
                upper[index] = spec.max
    for index, feature_spec in enumerate(data.specs):
        if feature_spec.kind == "categorical":  # every code, the unseen bucket included
            lower[index], upper[index] = 0, feature_spec.unseen_code
    return lower, upper


def evaluate_gates(
    config: ProjectConfig, gates: GateConfig, candidate: str | None = None
) -> GateResult:
    """Run every gate on ``candidate`` (default: the latest version) and return all results.

    Data checks, then the metric gates, then the model checks: each check group is a
    loop over the check registry (:mod:`driftgate.gates.checks`) on one GateInputs.
    """
    tracking, name = config.tracking, config.model.name
    if candidate is not None and not re.fullmatch(r"[0-9]+", str(candidate)):
        # A version names report folders (promote-NAME-vN): nothing but digits.
        raise ConfigError(f"candidate {candidate!r}: a model version is a whole number")
    candidate = candidate or registry.latest_version(tracking, name)
    champion = registry.alias_version(tracking, name, registry.CHAMPION_ALIAS)
    if champion == candidate:
        champion_for_comparison = None
        log.info("v%s is already the champion; evaluating absolute gates only", candidate)
    else:
        champion_for_comparison = champion
    result = GateResult(model_name=name, candidate=candidate, champion=champion)
    info = registry.version_info(tracking, name, candidate)
    if not registry.is_complete(info.version_tags):
        raise registry.RegistryError(
            f"{name} v{candidate} was cut off mid-registration (no "
            f"{registry.TAG_REGISTRATION} tag); it cannot be a candidate: train again"
        )
    data = prepare_data(config, enforce_contract=False)
    held_out = getattr(data.splits, SPLITS[gates.promotion.split])

    pyfunc = registry.load_pyfunc(tracking, f"models:/{name}/{candidate}")
    candidate_probabilities, candidate_metrics = _metrics_on(pyfunc.predict, held_out, data)
    champion_metrics = None
    if champion_for_comparison is not None:
        champion_model = registry.load_pyfunc(tracking, f"models:/{name}/{champion_for_comparison}")
        _, champion_metrics = _metrics_on(champion_model.predict, held_out, data)
    architecture, state = registry.load_weights(tracking, info.run_id)
    lower, upper = _bounds(data)
    inputs = GateInputs(
        task=TASK,
        predict=pyfunc.predict,
        model=_rebuild(architecture, state),
        rebuild=lambda: TabularClassifier(**architecture),
        rows=feature_matrix(held_out, data.specs),
        lower=lower,
        upper=upper,
        probabilities=candidate_probabilities,
        n_features=len(data.features),
        signature_inputs=info.signature_inputs,
        train_metrics=_split_metrics(info.run_metrics, "train"),
        val_metrics=_split_metrics(info.run_metrics, "val"),
        recorded_environment=info.environment,
        current_environment=describe_environment(config.root),
        contract_result=data.contract_result,
        # The candidate must have been trained on the data version evaluated here,
        # otherwise "held-out" rows may be rows it was trained on.
        recorded_data_digest=info.version_tags.get(registry.TAG_DATA_DIGEST, "unknown"),
        data_digest=data.digest,
        settings=gates.model_checks.settings(),
    )

    result.checks.extend(run_checks("data", inputs))
    for gate in gates.promotion.metrics:
        result.checks.extend(
            evaluate_metric_gate(gate, gates.promotion.split, candidate_metrics, champion_metrics)
        )
    result.checks.extend(run_checks("model_checks", inputs))
    return result


def _split_metrics(run_metrics: dict[str, float], split: str) -> dict[str, float]:
    prefix = f"{split}_"
    return {k.removeprefix(prefix): v for k, v in run_metrics.items() if k.startswith(prefix)}


def check_tag(check: CheckResult) -> str:
    """``PASS: 0.8701 (>= 0.8000)``: the verdict, what was observed, and the bar."""
    bar = f" ({check.threshold})" if check.threshold not in ("", "-") else ""
    return f"{check.status}: {check.observed}{bar}"


def gate_tags(result: GateResult, evaluated_at: str, report_uri: str) -> dict[str, str]:
    """Tags the MLflow UI shows on the version and its run: the summary, one per check."""
    tags = {
        registry.TAG_GATE_STATUS: "passed" if result.passed else "failed",
        registry.TAG_GATE_EVALUATED_AT: evaluated_at,
        registry.TAG_GATE_CHAMPION: result.champion or registry.NO_VERSION,
        registry.TAG_GATE_FAILED_CHECKS: ",".join(c.name for c in result.failures) or "-",
        registry.TAG_GATE_REPORT: report_uri,
    }
    for check in result.checks:
        key = registry.TAG_GATE_PREFIX + check.name
        if key in tags:  # a check named like a summary tag would silently overwrite it
            raise ValueError(f"gate check '{check.name}' collides with the summary tag {key}")
        tags[key] = check_tag(check)
    return tags


def gate_verdict(result: GateResult, evaluated_at: str, report_uri: str) -> str:
    """The Gate paragraph of the version's description: verdict, time, what decided it."""
    champion = f"v{result.champion}" if result.champion else "none"
    if result.passed:
        metrics = ", ".join(
            f"{c.name} {c.observed}" for c in result.checks if c.group == "promotion"
        )
        text = (
            f"passed {evaluated_at}: all {len(result.checks)} checks pass "
            f"(champion at evaluation: {champion}). {metrics}."
        )
    else:
        failed = "; ".join(
            f"`{c.name}` {c.observed} ({c.message or c.threshold})" for c in result.failures
        )
        text = (
            f"failed {evaluated_at}: {len(result.failures)} of {len(result.checks)} checks "
            f"failed: {failed}. Champion unchanged ({champion})."
        )
    return f"{text} Report: {report_uri}"


def run_promotion(
    config: ProjectConfig,
    gates: GateConfig,
    candidate: str | None = None,
    report_dir: Path | None = None,
) -> PromotionOutcome:
    """Evaluate, write reports, record them on the candidate, and promote only if all pass."""
    result = evaluate_gates(config, gates, candidate)
    folder = report_dir or (
        config.home_dir / "reports" / f"promote-{result.model_name}-v{result.candidate}"
    )
    files = result.write(folder)
    record_gate(config, result, files)
    promoted, previous = False, None
    if result.passed:
        promoted, previous = True, promote(config, result)
    return PromotionOutcome(result, promoted, previous, files)


GATE_ARTIFACT_FOLDER = "gates"


def record_gate(config: ProjectConfig, result: GateResult, files: dict[str, Path]) -> None:
    """Attach the reports to the candidate's run, tag version and run with every check,
    and write the verdict into the version's description."""
    tracking, name = config.tracking, config.model.name
    run_id = registry.version_info(tracking, name, result.candidate).run_id
    evaluated_at = datetime.now(UTC).isoformat(timespec="seconds")
    report_uri = f"runs:/{run_id}/{GATE_ARTIFACT_FOLDER}/{files['markdown'].name}"
    registry.record_gate_result(
        tracking,
        name,
        result.candidate,
        run_id,
        gate_tags(result, evaluated_at, report_uri),
        files,
        artifact_folder=GATE_ARTIFACT_FOLDER,
        verdict=gate_verdict(result, evaluated_at, report_uri),
    )


def promote(config: ProjectConfig, result: GateResult) -> str | None:
    """Move ``champion`` to a candidate whose gate passed; returns the previous champion."""
    if not result.passed:
        raise ValueError(f"v{result.candidate} failed the gate; refusing to promote it")
    if result.champion == result.candidate:
        return None  # already champion: nothing to move
    # MLflow aliases are last-writer-wins: two promotions that both checked the same
    # champion would both "succeed". The lock makes check-and-move one step, so the
    # second sees the first's champion and refuses (re-run the gate).
    with champion_lock(config):
        return registry.move_champion(
            config.tracking, config.model.name, result.candidate, expected_champion=result.champion
        )


@contextlib.contextmanager
def champion_lock(config: ProjectConfig):
    """Hold the per-model lock on ``champion`` in the control store (shared by every
    promoter that shares ``serving.control_store_url``: point CI runners at one)."""
    from driftgate.stores.factories import control_store

    store = control_store(config)
    try:
        with store.exclusive(f"champion:{config.model.name}"):
            yield
    finally:
        store.close()
