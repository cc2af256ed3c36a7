"""The promotion job: evaluate every gate on a candidate, record it, move the aliases.

:func:`run_promotion` is the journey, its named steps (:data:`STEPS`) run through a step
runner (:mod:`driftgate.jobs.steps`): ``driftgate promote`` (CI) calls them directly,
the Prefect flow ``validate-and-promote`` runs each as a task of that name. No Prefect
here, and no MLflow outside :mod:`driftgate.registry`.
"""

from __future__ import annotations

import contextlib
import logging
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

from driftgate import registry
from driftgate.config import ProjectConfig
from driftgate.core.yamlconfig import ConfigError
from driftgate.environment import describe_environment
from driftgate.gates.checks import GateInputs, NotApplicable, run_checks
from driftgate.gates.config import GateConfig
from driftgate.gates.metrics import evaluate_metric_gate
from driftgate.gates.paired import ROW_METRICS
from driftgate.gates.recent import judge_recent
from driftgate.gates.result import CheckResult, GateResult
from driftgate.jobs.data import prepare_data
from driftgate.jobs.steps import StepRunner, call_step
from driftgate.training.evaluate import TASK_METRICS, task_metrics
from driftgate.training.flavour import (
    TRAIN,
    ModelSpec,
    flavour_of,
    no_rebuild_reason,
    set_plugin_root,
)
from driftgate.training.inputs import encode_target, model_inputs
from driftgate.training.prepared import PreparedData, read_window_rows

log = logging.getLogger(__name__)

SPLITS = {"val": "validation", "test": "test"}


@dataclass(frozen=True)
class Approval:
    """Whether a candidate that passed the gate replaces the champion, and why."""

    promote: bool
    decision: str | None = None  # a person's ("approved", "rejected"); None: nobody asked
    note: str | None = None  # what the outcome says of it (how a person can still promote)


# A second say after the gate, for a candidate that passed it (a retrain's approval:
# :func:`driftgate.jobs.retrain.decide_approval`); without one the gate alone decides.
Approve = Callable[[GateResult], Approval]


@dataclass(frozen=True)
class PromotionOutcome:
    result: GateResult
    promoted: bool
    previous_champion: str | None
    report_files: dict[str, Path]
    approval: Approval | None = None

    def summary(self) -> dict:
        """JSON-able: what the ``validate-and-promote`` flow returns and a retrain records."""
        result = self.result
        return {
            "model_name": result.model_name,
            "candidate": result.candidate,
            "champion_before": result.champion,
            "passed": result.passed,
            "promoted": self.promoted,
            "decision": self.approval.decision if self.approval else None,
            "note": self.approval.note if self.approval else None,
            "previous_champion": self.previous_champion,
            "failed_checks": [c.name for c in result.failures],
            "reports": {kind: str(path) for kind, path in self.report_files.items()},
        }


def check_gates_for_task(gates: GateConfig, task: str, where: str = "gates.yaml") -> None:
    """ConfigError (exit 2) naming a promotion metric the task does not have."""
    known = TASK_METRICS[task]
    for index, gate in enumerate(gates.promotion.metrics):
        if gate.metric not in known:
            raise ConfigError(
                f"{where}: promotion.metrics.{index}.metric: '{gate.metric}' is not a metric of "
                f"a {task} model (model.task); use one of {', '.join(known)}"
            )
    recent = gates.promotion.recent
    if recent is not None and recent.metric is not None and recent.metric not in ROW_METRICS[task]:
        raise ConfigError(
            f"{where}: promotion.recent.metric: '{recent.metric}' is not a per-row metric of "
            f"a {task} model (model.task); use one of {', '.join(ROW_METRICS[task])}"
        )
    overfitting = gates.model_checks.settings().get("overfitting")
    metric = getattr(overfitting, "metric", None)
    if metric is not None and metric not in known:
        raise ConfigError(
            f"{where}: model_checks.overfitting.metric: '{metric}' is not a metric of a "
            f"{task} model (model.task); use one of {', '.join(known)}"
        )


def _metrics_on(
    predict, frame, data: PreparedData, spec: ModelSpec, decision_threshold: float
) -> tuple[np.ndarray, dict[str, float]]:
    """Held-out metrics (binary accuracy at ``decision_threshold``, the service's); NaN
    metrics (failing their gates) when predictions are not finite or misshapen, so a
    broken model is reported by the gate instead of crashing it."""
    outputs = np.asarray(predict(model_inputs(frame, spec.features)), np.float64)
    if spec.task != "multiclass":
        outputs = outputs.ravel()
    broken = dict.fromkeys(TASK_METRICS[spec.task], float("nan"))
    if not np.isfinite(outputs).all():
        return outputs, broken
    target = encode_target(spec.task, frame[data.target], spec.classes, "held-out")
    try:
        return outputs, task_metrics(spec.task, target, outputs, decision_threshold)
    except ValueError:  # a wrong output shape: the output_shape check names it
        return outputs, broken


def recent_rows(config: ProjectConfig, held_out, split: str, rows: int):
    """The held-out split's labelled production rows, the newest ``rows`` of them, or
    why there are none. A retrain's data (:mod:`driftgate.jobs.retrain_data`) appends
    the window's rows, in time order, to the end of each split and records how many;
    configured data without a window has none (a first model is judged on the split)."""
    if config.data.prepared is None:
        return None, "no labelled production rows: the configured data has no retrain window"
    added = read_window_rows(config.resolve(config.data.prepared)).get(split, 0)
    if added <= 0:
        return None, f"the retrain window added no labelled production rows to the {split} split"
    return held_out.iloc[len(held_out) - min(added, rows) :], ""


def _bounds(data: PreparedData, spec: ModelSpec) -> tuple[np.ndarray, np.ndarray]:
    """Per-feature bounds of valid inputs: the data contract's min/max, else the
    training data's observed range for features the contract leaves open; a
    categorical feature's codes run from 0 to its unseen bucket."""
    from driftgate.data_contracts import Contract

    train = model_inputs(data.splits.train, spec.features)
    lower, upper = np.nanmin(train, axis=0), np.nanmax(train, axis=0)
    for index, feature in enumerate(spec.features):
        if feature.kind == "categorical":
            lower[index], upper[index] = 0, feature.unseen_code
    if data.contract_path is not None:
        columns = Contract.load(data.contract_path).columns
        for index, feature in enumerate(spec.features):
            if feature.kind == "categorical":
                continue
            column = columns.get(feature.name)
            if column is not None and column.min is not None:
                lower[index] = column.min
            if column is not None and column.max is not None:
                upper[index] = column.max
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
    set_plugin_root(config.root)
    # The model first: the allow-list refuses a hostile version before anything else of
    # it is read.
    pyfunc = registry.load_pyfunc(tracking, f"models:/{name}/{candidate}")
    architecture, state = _weights(tracking, info)
    spec = ModelSpec.from_dict(architecture, data.features)
    if spec.task != config.model.task:
        log.warning(
            "%s v%s was trained for task %s; model.task says %s: gating it as %s",
            name, candidate, spec.task, config.model.task, spec.task,
        )  # fmt: skip
    check_gates_for_task(gates, spec.task)
    threshold = config.serving.decision_threshold
    candidate_outputs, candidate_metrics = _metrics_on(
        pyfunc.predict, held_out, data, spec, threshold
    )
    champion_metrics, champion_predict = None, None
    if champion_for_comparison is not None:
        champion_model = registry.load_pyfunc(tracking, f"models:/{name}/{champion_for_comparison}")
        champion_info = registry.version_info(tracking, name, champion_for_comparison)
        champion_spec = ModelSpec.from_dict(_weights(tracking, champion_info)[0], data.features)
        if champion_spec.task == spec.task and champion_spec.classes == spec.classes:
            _, champion_metrics = _metrics_on(
                champion_model.predict, held_out, data, spec, threshold
            )
            champion_predict = champion_model.predict
        else:
            log.warning(
                "champion v%s predicts %s %s, the candidate %s %s: comparing absolute gates only",
                champion_for_comparison, champion_spec.task, list(champion_spec.classes),
                spec.task, list(spec.classes),
            )  # fmt: skip
    recent_checks, judged = _judge_recent_slice(
        config, gates, data, spec, held_out, pyfunc.predict, champion_predict, threshold
    )
    if judged is None:  # no recent slice: the trivial baseline judges the held-out split
        judged = (
            f"{SPLITS[gates.promotion.split]} split ({len(held_out)} rows)",
            encode_target(spec.task, held_out[data.target], spec.classes, "held-out"),
            candidate_outputs,
        )
    lower, upper = _bounds(data, spec)
    inputs = GateInputs(
        task=spec.task,
        predict=pyfunc.predict,
        **_trained_inputs(tracking, info, data, spec, state),
        rows=model_inputs(held_out, spec.features),
        lower=lower,
        upper=upper,
        probabilities=candidate_outputs,
        decision_threshold=threshold,
        n_outputs=spec.n_outputs,
        n_features=len(spec.features),
        signature_inputs=info.signature_inputs,
        recorded_environment=info.environment,
        current_environment=describe_environment(config.root),
        contract_result=data.contract_result,
        judged_slice=judged[0],
        judged_targets=judged[1],
        judged_outputs=judged[2],
        settings=gates.model_checks.settings(),
        # The ONNX export (export_parity, format onnx) is written here and logged on the
        # version's run by record_gate, where the onnxruntime serving backend reads it.
        export_dir=config.home_dir / "exports" / f"{name}-v{candidate}",
    )

    result.checks.extend(run_checks("data", inputs))
    for gate in gates.promotion.metrics:
        result.checks.extend(
            evaluate_metric_gate(gate, gates.promotion.split, candidate_metrics, champion_metrics)
        )
    result.checks.extend(recent_checks)
    result.checks.extend(run_checks("model_checks", inputs))
    return result


def _judge_recent_slice(
    config, gates: GateConfig, data, spec, held_out, predict, champion_predict, threshold
) -> tuple[list[CheckResult], tuple | None]:
    """``promotion.recent``'s results, and the slice the trivial baseline judges
    (name, targets, candidate outputs), None when there is no recent slice to judge."""
    settings = gates.promotion.recent
    if settings is None:
        return [], None
    split = SPLITS[gates.promotion.split]
    frame, why = recent_rows(config, held_out, split, settings.rows)
    if frame is None or len(frame) < settings.min_rows:
        results = judge_recent(
            settings, spec.task, None if frame is None else frame[data.target].to_numpy(),
            None, None, threshold, missing_reason=why,
        )  # fmt: skip
        return results, None
    targets = encode_target(spec.task, frame[data.target], spec.classes, "recent slice")
    candidate = _outputs(predict, frame, spec)
    champion = None if champion_predict is None else _outputs(champion_predict, frame, spec)
    results = judge_recent(settings, spec.task, targets, candidate, champion, threshold)
    name = f"recent slice ({len(frame)} newest labelled production rows of the {split} split)"
    return results, (name, targets, candidate)


def _outputs(predict, frame, spec: ModelSpec) -> np.ndarray:
    outputs = np.asarray(predict(model_inputs(frame, spec.features)), np.float64)
    return outputs if spec.task == "multiclass" else outputs.ravel()


def _weights(tracking, info: registry.VersionInfo) -> tuple[dict, dict | None]:
    """A version's ``architecture.json`` and state dict; an adopted version (trained
    elsewhere) has no weights folder: a binary model on the data's features."""
    if registry.is_adopted(info.version_tags):
        return {}, None
    return registry.load_weights(tracking, info.run_id)


def _trained_inputs(
    tracking, info: registry.VersionInfo, data: PreparedData, spec: ModelSpec, state
) -> dict:
    """What only a version driftgate trained has: its module rebuilt from the state dict,
    its train/validation metrics and training-data digest. An adopted version (trained
    elsewhere, ``driftgate adopt``) has none of them: the checks that need them are
    reported as not applicable. A module built by the user's ``model.train`` loop
    without a factory has its metrics and digest but cannot be rebuilt."""
    if registry.is_adopted(info.version_tags):
        from driftgate.jobs.adopt import NOT_APPLICABLE_INPUTS

        return dict(NOT_APPLICABLE_INPUTS)
    flavour = flavour_of(spec)
    if spec.flavour == TRAIN:  # the user's loop built it: nothing can rebuild it
        absent = NotApplicable(no_rebuild_reason(spec))
        module = {"model": absent, "rebuild": absent}
    else:
        module = {
            "model": flavour.rebuild(spec, state),
            "rebuild": lambda: flavour.rebuild(spec, None),
        }
    return {
        **module,
        "train_metrics": _split_metrics(info.run_metrics, "train"),
        "val_metrics": _split_metrics(info.run_metrics, "val"),
        # The candidate must have been trained on the data version evaluated here,
        # otherwise "held-out" rows may be rows it was trained on.
        "recorded_data_digest": info.version_tags.get(registry.TAG_DATA_DIGEST, "unknown"),
        "data_digest": data.digest,
    }


def _split_metrics(run_metrics: dict[str, float], split: str) -> dict[str, float]:
    prefix = f"{split}_"
    return {k.removeprefix(prefix): v for k, v in run_metrics.items() if k.startswith(prefix)}


def check_tag(check: CheckResult) -> str:
    """``PASS: 0.8701 (>= 0.8000)``: the verdict, what was observed, and the bar;
    ``NOT_APPLICABLE: why`` for a check that does not apply to the candidate."""
    if check.not_applicable:
        return f"{check.status}: {check.message}"
    bar = f" ({check.threshold})" if check.threshold not in ("", "-") else ""
    return f"{check.status}: {check.observed}{bar}"


def gate_tags(result: GateResult, evaluated_at: str, report_uri: str) -> dict[str, str]:
    """Tags the MLflow UI shows on the version and its run: the summary, one per check."""
    tags = {
        registry.TAG_GATE_STATUS: "passed" if result.passed else "failed",
        registry.TAG_GATE_EVALUATED_AT: evaluated_at,
        registry.TAG_GATE_CHAMPION: result.champion or registry.NO_VERSION,
        registry.TAG_GATE_FAILED_CHECKS: ",".join(c.name for c in result.failures) or "-",
        registry.TAG_GATE_NOT_APPLICABLE: ",".join(c.name for c in result.not_applicable) or "-",
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
        counted = f"all {len(result.checks)} checks pass"
        if result.not_applicable:
            names = ", ".join(c.name for c in result.not_applicable)
            counted = (
                f"all {len(result.checks) - len(result.not_applicable)} applicable checks "
                f"pass, {len(result.not_applicable)} not applicable ({names})"
            )
        text = f"passed {evaluated_at}: {counted} (champion at evaluation: {champion}). {metrics}."
    else:
        failed = "; ".join(
            f"`{c.name}` {c.observed} ({c.message or c.threshold})" for c in result.failures
        )
        text = (
            f"failed {evaluated_at}: {len(result.failures)} of {len(result.checks)} checks "
            f"failed: {failed}. Champion unchanged ({champion})."
        )
    return f"{text} Report: {report_uri}"


STEPS = ("evaluate-gates", "record-gate", "move-champion")


def run_promotion(
    config: ProjectConfig,
    gates: GateConfig,
    candidate: str | None = None,
    report_dir: Path | None = None,
    *,
    approve: Approve | None = None,
    run_step: StepRunner = call_step,
    on_gate_recorded: Callable[[GateResult], None] | None = None,
) -> PromotionOutcome:
    """Evaluate, write reports, record them on the candidate, and promote only if all pass
    (and ``approve``, when given, lets it through). The steps of :data:`STEPS`, in order,
    through ``run_step`` (here, or Prefect tasks); ``on_gate_recorded``: what the caller
    shows people of the recorded gate (the flow: a markdown artifact)."""
    result = run_step("evaluate-gates", evaluate_gates, config, gates, candidate)
    files = run_step("record-gate", write_gate_reports, config, result, report_dir)
    if on_gate_recorded is not None:
        on_gate_recorded(result)
    approval = None
    if result.passed and approve is not None:
        approval = approve(result)
    promoted, previous = False, None
    if result.passed and (approval is None or approval.promote):
        promoted, previous = True, run_step("move-champion", promote, config, result)
    return PromotionOutcome(result, promoted, previous, files, approval)


def write_gate_reports(
    config: ProjectConfig, result: GateResult, report_dir: Path | None = None
) -> dict[str, Path]:
    """The gate's reports (table, JSON, JUnit, Markdown) in ``report_dir`` (default: the
    candidate's folder under ``home/reports``), recorded on the candidate."""
    folder = report_dir or (
        config.home_dir / "reports" / f"promote-{result.model_name}-v{result.candidate}"
    )
    files = result.write(folder)
    record_gate(config, result, files)
    return files


GATE_ARTIFACT_FOLDER = "gates"


def gate_report_uri(run_id: str, markdown: Path) -> str:
    """Where :func:`record_gate` logs the Markdown gate report on the candidate's run."""
    return f"runs:/{run_id}/{GATE_ARTIFACT_FOLDER}/{Path(markdown).name}"


def record_gate(config: ProjectConfig, result: GateResult, files: dict[str, Path]) -> None:
    """Attach the reports (and the checks' exported files, such as the ONNX model) to the
    candidate's run, tag version and run with every check, and write the verdict into
    the version's description."""
    tracking, name = config.tracking, config.model.name
    run_id = registry.version_info(tracking, name, result.candidate).run_id
    evaluated_at = datetime.now(UTC).isoformat(timespec="seconds")
    report_uri = gate_report_uri(run_id, files["markdown"])
    registry.record_gate_result(
        tracking,
        name,
        result.candidate,
        run_id,
        gate_tags(result, evaluated_at, report_uri),
        files,
        artifact_folder=GATE_ARTIFACT_FOLDER,
        verdict=gate_verdict(result, evaluated_at, report_uri),
        exports=[Path(path) for check in result.checks for path in check.artifacts],
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
