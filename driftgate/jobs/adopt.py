"""The adoption job: a model trained and logged elsewhere becomes a version driftgate
gates, serves and monitors like one it trained.

``driftgate adopt models:/NAME/VERSION --reference PATH`` (or ``runs:/RUN_ID/PATH``,
registered first as a version of ``model.name``):

1. read the reference data (CSV / Parquet) and choose the features (``data.features``,
   else every column but the target and ``date``, in file order);
2. resolve the version; refuse one driftgate trained, and one adopted before from
   other reference data (the same reference again changes nothing);
3. load the model through the allow-list (:mod:`driftgate.modelguard`: a pt2 PyTorch
   model or an ONNX model, no pickle; a refusal is exit 3);
4. check its logged signature against the reference columns and dtypes (exit 2 naming
   the columns) and its outputs (a binary model returns P(class 1) per row);
5. fit what a trained version carries: the reference profile (drift checks; with the
   model's outputs on ``--test``, else on the labelled reference, for the output
   monitors), the data
   contract (inferred, or the project's ``data.contract`` validated), metrics on the
   reference and on ``--test``; tag the version (``driftgate.adopted=true``, features,
   task, data digests, ``driftgate.registration=complete`` last).

What an adopted version does not have, the gate reports as not applicable
(:data:`NOT_APPLICABLE_INPUTS`): there is no state dict and no ``nn.Module`` class to
rebuild it from, no train/validation metrics of its training, no digest of its
training data. No MLflow here: :mod:`driftgate.registry` does it.
"""

from __future__ import annotations

import json
import logging
import re
import tempfile
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pandas as pd

from driftgate import modelguard, registry
from driftgate.config import ProjectConfig
from driftgate.core.errors import EXIT_USAGE, DriftgateError
from driftgate.gates.checks import NotApplicable
from driftgate.jobs.data import _relative_to
from driftgate.training.data import DATE_COLUMN, DataError, content_digest
from driftgate.training.evaluate import classification_metrics, prefixed

log = logging.getLogger(__name__)

TASK = "binary"  # the task adoption supports today (P(class 1) per row)

_NO_MODULE = (
    "adopted model: no state dict or nn.Module class for driftgate to rebuild "
    "(the logged pt2 program or ONNX model is what is gated and served)"
)
_NO_TRAINING_METRICS = "adopted model: its train/validation metrics were not recorded by driftgate"
_NO_TRAINING_DATA = "adopted model: the data it was trained on is unknown to driftgate"

# The GateInputs an adopted version cannot provide; the checks needing them are
# reported as not applicable (reload_parity, export_parity, registry_parity,
# overfitting, data_version), never as passes.
NOT_APPLICABLE_INPUTS = {
    "model": NotApplicable(_NO_MODULE),
    "rebuild": NotApplicable(_NO_MODULE),
    "train_metrics": NotApplicable(_NO_TRAINING_METRICS),
    "val_metrics": NotApplicable(_NO_TRAINING_METRICS),
    "recorded_data_digest": NotApplicable(_NO_TRAINING_DATA),
    "data_digest": NotApplicable(_NO_TRAINING_DATA),
}


class AdoptionError(DriftgateError, ValueError):
    """The model cannot be adopted as given (signature, outputs, a second reference);
    the message names the columns, the file or the version."""

    exit_code = EXIT_USAGE


@dataclass(frozen=True)
class AdoptionOutcome:
    model_name: str
    version: str
    run_id: str
    features: list[str]
    metrics: dict[str, float] = field(default_factory=dict)
    changed: bool = True  # False: adopted before from the same reference, nothing written
    registered_from: str | None = None  # the runs:/ URI registered as this version

    @property
    def model_uri(self) -> str:
        return f"models:/{self.model_name}/{self.version}"


_MODELS_URI = re.compile(r"models:/(?P<name>[A-Za-z0-9_.\-]+)/(?P<version>[0-9]+)")
_RUNS_URI = re.compile(r"runs:/(?P<run>[0-9a-fA-F]{8,64})/(?P<path>[^\s]+)")


def resolve_version(config: ProjectConfig, model_uri: str) -> tuple[str, str, str | None]:
    """(model name, version, the runs:/ URI registered or None) of ``model_uri``."""
    if match := _MODELS_URI.fullmatch(model_uri):
        name, version = match["name"], match["version"]
        return name, registry.existing_version(config.tracking, name, version), None
    if _RUNS_URI.fullmatch(model_uri):
        name = config.model.name
        return name, registry.register_run_model(config.tracking, model_uri, name), model_uri
    raise AdoptionError(
        f"{model_uri!r}: expected models:/NAME/VERSION or runs:/RUN_ID/PATH "
        "(an alias such as models:/NAME@champion is not adopted: name the version)"
    )


def read_table(path: Path, what: str) -> pd.DataFrame:
    from driftgate.data_contracts.sources import read_data

    frame = read_data(path)
    if frame.empty:
        raise DataError(f"{what} {path}: no rows")
    return frame


def choose_features(config: ProjectConfig, frame: pd.DataFrame, where: Path) -> list[str]:
    """``data.features`` (each must be in ``frame``), else every column but the target
    and ``date``, in the file's order."""
    target = config.data.target
    if config.data.features is not None:
        missing = [c for c in config.data.features if c not in frame.columns]
        if missing:
            raise DataError(f"{where}: data.features column(s) not in the file: {missing}")
        return list(config.data.features)
    return [str(c) for c in frame.columns if c not in (target, DATE_COLUMN)]


def check_signature(
    signature_inputs: list[dict] | None, frame: pd.DataFrame, features: list[str], where: Path
) -> None:
    """The model's logged input signature accepts the reference's feature columns.

    A tensor signature (what ``mlflow.pytorch.log_model`` writes from an ndarray input
    example) must be float32 of width ``len(features)``, and every feature numeric; a
    column signature must name exactly the features, with compatible types.
    AdoptionError names the columns that do not fit.
    """
    non_numeric = [c for c in features if not pd.api.types.is_numeric_dtype(frame[c])]
    if not signature_inputs:
        raise AdoptionError(
            "the model was logged without an input signature; log it with an "
            "input_example (float32, one column per feature)"
        )
    if "tensor-spec" in signature_inputs[0]:
        spec = signature_inputs[0]["tensor-spec"]
        dtype, shape = spec.get("dtype"), list(spec.get("shape", ()))
        if dtype != "float32" or len(shape) != 2:
            raise AdoptionError(
                f"the model's signature takes {dtype} {tuple(shape)}; driftgate feeds "
                "float32 rows (-1, n_features)"
            )
        if shape[1] != len(features):
            raise AdoptionError(
                f"the model's signature takes {shape[1]} float32 columns; {where} has "
                f"{len(features)} feature columns {features} (target "
                f"'{_target_note(frame, features)}'); set data.features to the model's columns"
            )
        if non_numeric:
            raise AdoptionError(
                f"{where}: column(s) {non_numeric} are not numeric "
                f"({', '.join(str(frame[c].dtype) for c in non_numeric)}); "
                "the model's signature takes float32"
            )
        return
    declared = {spec.get("name"): spec.get("type") for spec in signature_inputs}
    missing = [name for name in declared if name not in features]
    extra = [name for name in features if name not in declared]
    numeric_types = {"float", "double", "integer", "long"}
    wrong = [
        f"{name} ({frame[name].dtype}, signature {kind})"
        for name, kind in declared.items()
        if name in features
        and (kind in numeric_types) != pd.api.types.is_numeric_dtype(frame[name])
    ]
    if missing or extra or wrong:
        parts = []
        if missing:
            parts.append(f"signature column(s) missing from {where}: {missing}")
        if extra:
            parts.append(f"feature column(s) the signature does not take: {extra}")
        if wrong:
            parts.append(f"dtype mismatch: {wrong}")
        raise AdoptionError("; ".join(parts))
    if list(declared) != features:
        raise AdoptionError(
            f"the model's signature orders its columns {list(declared)}; set "
            "data.features in that order"
        )


def _target_note(frame: pd.DataFrame, features: list[str]) -> str:
    return ", ".join(str(c) for c in frame.columns if c not in features) or "-"


def matrix_of(frame: pd.DataFrame, features: list[str], where: Path) -> np.ndarray:
    from driftgate.training.data import feature_matrix

    try:
        return feature_matrix(frame, features)
    except DataError as exc:
        raise DataError(f"{where}: {exc}") from None


def predict_probabilities(pyfunc, rows: np.ndarray, label: str) -> np.ndarray:
    """P(class 1) per row, or AdoptionError saying what the model returned instead."""
    try:
        output = np.asarray(pyfunc.predict(rows), dtype=np.float64)
    except Exception as exc:
        raise AdoptionError(f"{label}: predict failed on the reference rows: {exc}") from exc
    if output.ndim == 2 and output.shape[1] == 1:
        output = output[:, 0]
    if output.shape != (len(rows),):
        raise AdoptionError(
            f"{label} returned shape {output.shape} for {len(rows)} rows; a binary model "
            "returns one P(class 1) per row"
        )
    if not np.isfinite(output).all() or output.min() < 0 or output.max() > 1:
        raise AdoptionError(
            f"{label} returned values outside [0, 1] (min {np.nanmin(output):.4g}, max "
            f"{np.nanmax(output):.4g}); a binary model returns P(class 1): apply a sigmoid "
            "in its forward"
        )
    return output


def labelled_metrics(
    frame: pd.DataFrame,
    probabilities: np.ndarray,
    target: str,
    where: Path,
    decision_threshold: float,
):
    labels = frame[target]
    if labels.isna().any() or not set(labels.unique()) <= {0, 1}:
        raise DataError(f"{where}: target column '{target}' must be 0/1")
    return classification_metrics(labels.to_numpy(), probabilities, decision_threshold)


def environment_of(mlmodel: dict) -> dict[str, str]:
    """Python and the format's runtime versions (torch for pt2, onnx for ONNX) the model
    was logged with, read from its MLmodel (what the environment gate check compares
    with this environment); a model torch does not run is marked ``model_format: NAME``
    (the gate check then reports torch as not applicable)."""
    flavours = mlmodel.get("flavors") or {}
    # The model passed the allow-list, so a format claims it: its runtime, not a name test.
    model_format = modelguard.formats.format_claiming(flavours)
    runtime = model_format.runtime_versions if model_format else {}
    found = {
        "python": (flavours.get("python_function") or {}).get("python_version"),
        **{
            key: (flavours.get(flavour) or {}).get(field)
            for key, (flavour, field) in runtime.items()
        },
        "model_format": (
            model_format.name if model_format and not model_format.runs_on_torch else None
        ),
        "mlflow": mlmodel.get("mlflow_version"),
    }
    return {k: str(v) for k, v in found.items() if v}


def run_adoption(
    config: ProjectConfig, model_uri: str, reference: Path, test: Path | None = None
) -> AdoptionOutcome:
    """Adopt ``model_uri`` with ``reference`` (and ``test``) data; see the module doc."""
    reference = config.resolve(reference)
    frame = read_table(reference, "reference data")
    features = choose_features(config, frame, reference)
    digest = content_digest(frame[features])
    name, version, registered_from = resolve_version(config, model_uri)
    info = registry.version_info(config.tracking, name, version)
    label = f"models:/{name}/{version}"
    tags = info.version_tags
    if registry.is_adopted(tags) and registry.is_complete(tags):
        recorded = tags.get(registry.TAG_REFERENCE_DIGEST)
        if recorded != digest:
            raise AdoptionError(
                f"{label} was adopted before with other reference data (digest "
                f"{recorded}, this one {digest}); its profile and contract stay as they "
                "are: log the model again to adopt it with new reference data"
            )
        log.debug("%s was adopted before from the same reference data", label)
        return AdoptionOutcome(
            name, version, info.run_id, json.loads(tags[registry.TAG_FEATURES]), changed=False,
            registered_from=registered_from,
        )  # fmt: skip
    if registry.is_complete(tags):
        raise AdoptionError(
            f"{label} was trained and registered by driftgate; there is nothing to adopt"
        )

    pyfunc, mlmodel = registry.load_adoptable_model(config.tracking, label)
    check_signature(info.signature_inputs, frame, features, reference)
    probabilities = predict_probabilities(pyfunc, matrix_of(frame, features, reference), label)
    target = config.data.target
    threshold = config.serving.decision_threshold
    metrics: dict[str, float] = {}
    # The outputs the output monitors compare with: on held-out test data when given
    # (a calibrator fitted on what the model was trained on would flatter it), else on
    # the labelled reference.
    calibration = None
    if target in frame.columns:
        metrics |= prefixed(
            "reference",
            labelled_metrics(frame, probabilities, target, reference, threshold),
        )
        calibration = (probabilities, frame[target].to_numpy(), "reference")
    if test is not None:
        test = config.resolve(test)
        test_frame = read_table(test, "test data")
        if target not in test_frame.columns:
            raise DataError(f"{test}: target column '{target}' not found")
        check_signature(info.signature_inputs, test_frame, features, test)
        test_probabilities = predict_probabilities(
            pyfunc, matrix_of(test_frame, features, test), label
        )
        metrics |= prefixed(
            "test",
            labelled_metrics(test_frame, test_probabilities, target, test, threshold),
        )
        calibration = (test_probabilities, test_frame[target].to_numpy(), "test")

    environment = environment_of(mlmodel)
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch)
        profile = _fit_profile(frame, features, name, digest)
        profile.outputs = _fit_outputs(calibration, config.serving.decision_threshold)
        artifacts = {
            registry.REFERENCE_PROFILE_ARTIFACT: profile.save(
                folder / registry.REFERENCE_PROFILE_ARTIFACT
            ),
            registry.DATA_CONTRACT_ARTIFACT: _contract_files(
                config, frame, features, name, folder / registry.DATA_CONTRACT_ARTIFACT
            ),
        }  # fmt: skip
        reference_path = _relative_to(reference, config.root)
        adopted_at = datetime.now(UTC).isoformat(timespec="seconds")
        summary = ", ".join(f"{k} {v:.4f}" for k, v in metrics.items()) or "no labelled data"
        registry.record_adoption(
            config.tracking,
            name,
            version,
            info.run_id,
            artifacts=artifacts,
            metrics=metrics,
            run_tags={
                registry.TAG_ADOPTED: "true",
                **{
                    f"env.{k}": v for k, v in environment.items() if f"env.{k}" not in info.run_tags
                },
            },
            version_tags={
                registry.TAG_ADOPTED: "true",
                registry.TAG_ADOPTED_AT: adopted_at,
                registry.TAG_ADOPTED_FROM: registered_from or label,
                registry.TAG_FEATURES: json.dumps(features),
                registry.TAG_TASK: TASK,
                registry.TAG_REFERENCE_DIGEST: digest,
                registry.TAG_REFERENCE_PATH: reference_path,
            },
            description=(
                f"trained elsewhere, adopted {adopted_at} with reference data "
                f"{reference_path} ({len(frame)} rows, {len(features)} features, digest "
                f"{digest[:12]}); {summary}."
            ),
        )
    return AdoptionOutcome(
        name, version, info.run_id, features, metrics, changed=True, registered_from=registered_from
    )


def _fit_profile(frame: pd.DataFrame, features: list[str], model_name: str, digest: str):
    """The drift monitors' reference, fitted as training fits it (on the reference)."""
    from driftgate.monitors.profile import ReferenceProfile

    return ReferenceProfile.fit(
        frame[features],
        schema=dict.fromkeys(features, "numeric"),
        metadata={"model": model_name, "data_digest": digest, "split": "reference"},
    )


def _fit_outputs(calibration, decision_threshold: float):
    """The adopted model's outputs on labelled data, profiled and calibrated for the
    output monitors; None without labelled data, or when they cannot be calibrated
    (one class): those monitors then say so."""
    from driftgate.monitors.outputs import OutputsError, OutputsProfile

    if calibration is None:
        return None
    outputs, target, split = calibration
    try:
        return OutputsProfile.fit(
            TASK, np.asarray(outputs), target, decision_threshold=decision_threshold, split=split
        )
    except OutputsError as exc:
        log.warning("the adopted model's outputs are not profiled: %s", exc)
        return None


def _contract_files(
    config: ProjectConfig, frame: pd.DataFrame, features: list[str], name: str, folder: Path
) -> Path:
    """The project's contract (``data.contract``) validated on the reference, else one
    inferred from it (the target optional: requests do not carry it); with its result."""
    from driftgate.data_contracts import (
        Contract,
        infer_contract,
        render_markdown,
        validate_batch,
    )
    from driftgate.data_contracts.breach import ContractBreach

    folder.mkdir(parents=True)
    target = config.data.target
    columns = [*features, *([target] if target in frame.columns else [])]
    if config.data.contract is not None:
        contract = Contract.load(config.data.contract)
        result = validate_batch(
            contract, frame[[c for c in frame.columns if c in contract.columns]]
        )
        if not result.passed:
            raise ContractBreach(str(config.data.contract), result)
    else:
        optional = [target] if target in frame.columns else []
        contract = infer_contract(
            frame[columns], f"{name}-reference", optional=optional,
            description=f"inferred by `driftgate adopt` from the reference data of {name}",
        )  # fmt: skip
        result = validate_batch(contract, frame[columns])
    (folder / "contract.yaml").write_text(contract.to_yaml())
    (folder / "validation.md").write_text(render_markdown(result))
    (folder / "validation.json").write_text(json.dumps(result.to_dict(), indent=2, default=str))
    return folder
