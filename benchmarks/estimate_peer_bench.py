"""Regression (DLE) and multiclass ROC AUC estimates vs realized values, beside NannyML.

The data sets ship inside a PyPI package, so the run needs no download:

* with ``nannyml`` installed (not a driftgate dependency: ``pip install nannyml==0.13.1``),
  NannyML's own synthetic **car price** regression (60,000 reference rows, 60,000
  analysis rows with targets) and **credit card** multiclass data (3 classes), on the
  predictions the data sets carry; NannyML's DLE and CBPE are measured in the same run
  on the same chunks (6,000 rows, as NannyML's documentation chunks them);
* without it (the CI variant, ``--short``): scikit-learn's bundled **diabetes**
  regression (442 rows, a ridge model) and **digits** (1,797 images, 10 classes, a
  logistic regression), the peer skipped with a printed note.

Per chunk it prints the realized metric, driftgate's estimate with its sampling error,
whether the estimate's reliability check passed, and NannyML's estimate; then the mean
absolute error of each estimate against the realized values, and the share of chunks
whose realized value lies within 1.96 sampling errors of driftgate's estimate.

Multiclass ROC AUC: driftgate estimates it from what its sample store keeps (top
probability and predicted class, :mod:`monitors.estimates.roc_auc`) and is compared with
the realized AUC of the same scores; NannyML's from the full probabilities, compared
with the full probabilities' realized AUC. Each is scored against its own truth.

``NML_DISABLE_USAGE_LOGGING=1 python benchmarks/estimate_peer_bench.py`` (``--short``:
the bundled scikit-learn data only).
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import time
import warnings
from dataclasses import dataclass

import numpy as np
import pandas as pd

from driftgate.monitors.estimates import get_estimate
from driftgate.monitors.outputs import OutputsProfile, output_frame

CHUNK_ROWS = 6_000


@dataclass
class Case:
    """One data set: reference and analysis features, outputs and targets."""

    name: str
    task: str
    features: list[str]
    reference: pd.DataFrame
    analysis: pd.DataFrame
    reference_outputs: np.ndarray  # regression: predictions; multiclass: probabilities
    analysis_outputs: np.ndarray
    reference_target: np.ndarray
    analysis_target: np.ndarray
    chunk_rows: int
    classes: tuple[str, ...] = ()
    nannyml: dict | None = None  # what NannyML needs to run on the same data


def nannyml_available() -> bool:
    return importlib.util.find_spec("nannyml") is not None


def _nannyml():
    os.environ.setdefault("NML_DISABLE_USAGE_LOGGING", "1")  # no telemetry from a benchmark
    import nannyml

    return nannyml


def car_price_case() -> Case:
    """NannyML's synthetic car price regression, with its predictions."""
    reference, analysis, targets = _nannyml().load_synthetic_car_price_dataset()
    analysis = analysis.merge(targets, on="id" if "id" in targets else "identifier")
    features = [
        c
        for c in reference.columns
        if c not in ("y_true", "y_pred", "timestamp", "id", "identifier", "partition")
    ]
    return Case(
        name="car price (NannyML)",
        task="regression",
        features=features,
        reference=reference,
        analysis=analysis,
        reference_outputs=reference["y_pred"].to_numpy(np.float64),
        analysis_outputs=analysis["y_pred"].to_numpy(np.float64),
        reference_target=reference["y_true"].to_numpy(np.float64),
        analysis_target=analysis["y_true"].to_numpy(np.float64),
        chunk_rows=CHUNK_ROWS,
        nannyml={"reference": reference, "analysis": analysis},
    )


def credit_card_case() -> Case:
    """NannyML's synthetic multiclass credit card data, with its probabilities."""
    reference, analysis, targets = _nannyml().load_synthetic_multiclass_classification_dataset()
    analysis = analysis.merge(targets, on="id" if "id" in targets else "identifier")
    probability = {
        c.removeprefix("y_pred_proba_"): c for c in reference if c.startswith("y_pred_proba_")
    }
    classes = tuple(probability)
    columns = list(probability.values())
    features = [
        c
        for c in reference.columns
        if c not in (*columns, "y_true", "y_pred", "timestamp", "id", "identifier", "partition")
    ]
    index = {c: i for i, c in enumerate(classes)}
    return Case(
        name="credit card, 3 classes (NannyML)",
        task="multiclass",
        features=features,
        reference=reference,
        analysis=analysis,
        reference_outputs=reference[columns].to_numpy(np.float64),
        analysis_outputs=analysis[columns].to_numpy(np.float64),
        reference_target=reference["y_true"].map(index).to_numpy(np.int64),
        analysis_target=analysis["y_true"].map(index).to_numpy(np.int64),
        chunk_rows=CHUNK_ROWS,
        classes=classes,
        nannyml={"reference": reference, "analysis": analysis, "probability": probability},
    )


def diabetes_case() -> Case:
    """scikit-learn's bundled diabetes data: a ridge model fitted on the first 150 rows,
    its reference the next 150, analysis the rest sorted by BMI (a shift, in chunks)."""
    from sklearn.datasets import load_diabetes
    from sklearn.linear_model import Ridge

    data = load_diabetes(as_frame=True)
    frame, target = data.data, data.target.to_numpy(np.float64)
    model = Ridge(alpha=0.1).fit(frame.iloc[:150], target[:150])
    rest = np.arange(300, len(frame))
    rest = rest[np.argsort(frame["bmi"].to_numpy()[rest], kind="stable")]
    ref = np.arange(150, 300)
    return Case(
        name="diabetes (scikit-learn)",
        task="regression",
        features=list(frame.columns),
        reference=frame.iloc[ref].reset_index(drop=True),
        analysis=frame.iloc[rest].reset_index(drop=True),
        reference_outputs=model.predict(frame.iloc[ref]),
        analysis_outputs=model.predict(frame.iloc[rest]),
        reference_target=target[ref],
        analysis_target=target[rest],
        chunk_rows=48,
    )


def digits_case() -> Case:
    """scikit-learn's bundled digits: a logistic regression fitted on 600 images,
    its reference the next 600, analysis the rest, in chunks."""
    from sklearn.datasets import load_digits
    from sklearn.linear_model import LogisticRegression

    data = load_digits(as_frame=True)
    frame, target = data.data, data.target.to_numpy(np.int64)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # convergence: the benchmark needs a model, not the best
        model = LogisticRegression(max_iter=200, C=0.01).fit(frame.iloc[:600], target[:600])
    ref, rest = np.arange(600, 1200), np.arange(1200, len(frame))
    return Case(
        name="digits, 10 classes (scikit-learn)",
        task="multiclass",
        features=list(frame.columns),
        reference=frame.iloc[ref].reset_index(drop=True),
        analysis=frame.iloc[rest].reset_index(drop=True),
        reference_outputs=model.predict_proba(frame.iloc[ref]),
        analysis_outputs=model.predict_proba(frame.iloc[rest]),
        reference_target=target[ref],
        analysis_target=target[rest],
        chunk_rows=100,
        classes=tuple(str(c) for c in range(10)),
    )


def chunks(rows: int, size: int) -> list[slice]:
    """Consecutive chunks of ``size`` rows; a last partial chunk joins the one before
    (as NannyML's ``chunk_size`` leaves no small chunk)."""
    starts = list(range(0, rows - size + 1, size)) or [0]
    return [slice(s, starts[i + 1] if i + 1 < len(starts) else rows) for i, s in enumerate(starts)]


def window_of(case: Case, part: slice) -> pd.DataFrame:
    outputs = output_frame(case.task, case.analysis_outputs[part], 0.5)
    return pd.concat(
        [case.analysis.iloc[part][case.features].reset_index(drop=True), outputs], axis=1
    )


def driftgate_estimates(case: Case, metrics: tuple[str, ...]) -> pd.DataFrame:
    """Per chunk and metric: realized, estimated, sampling error, reliability (and for
    multiclass ROC AUC the realized AUC of the full probabilities, ``realized_full``)."""
    from sklearn.metrics import roc_auc_score

    profile = OutputsProfile.fit(
        case.task,
        case.reference_outputs,
        case.reference_target,
        classes=case.classes,
        features=case.reference[case.features].reset_index(drop=True),
    )
    rows = []
    for number, part in enumerate(chunks(len(case.analysis), case.chunk_rows)):
        frame = window_of(case, part)
        for metric in metrics:
            estimate = profile.estimate(frame, metric)
            rows.append(
                {
                    "chunk": number,
                    "metric": metric,
                    "rows": len(frame),
                    "realized": get_estimate(case.task, metric).realized(
                        frame, case.analysis_target[part]
                    ),
                    "estimated": estimate.value,
                    "standard_error": estimate.standard_error,
                    "reliable": estimate.reliability["reliable"],
                    "outside_share": estimate.reliability.get("outside_share", 0.0),
                }
            )
            if case.task == "multiclass" and metric == "roc_auc":
                # What NannyML is scored against: the AUC of every class's probability.
                rows[-1]["realized_full"] = roc_auc_score(
                    case.analysis_target[part], case.analysis_outputs[part], multi_class="ovr"
                )
    return pd.DataFrame(rows)


def nannyml_estimates(case: Case, metrics: tuple[str, ...]) -> pd.DataFrame:
    """NannyML's DLE (regression) or CBPE (multiclass) on the same chunks, and the
    realized metric NannyML's estimate is compared with (full probabilities)."""
    from sklearn.metrics import mean_absolute_error, mean_squared_error, roc_auc_score

    nml = _nannyml()
    reference, analysis = case.nannyml["reference"], case.nannyml["analysis"]
    if case.task == "regression":
        estimator = nml.DLE(
            feature_column_names=case.features,
            y_pred="y_pred",
            y_true="y_true",
            metrics=list(metrics),
            chunk_size=case.chunk_rows,
            tune_hyperparameters=False,
        )
    else:
        estimator = nml.CBPE(
            problem_type="classification_multiclass",
            y_pred_proba=case.nannyml["probability"],
            y_pred="y_pred",
            y_true="y_true",
            metrics=list(metrics),
            chunk_size=case.chunk_rows,
        )
    estimator.fit(reference)
    table = estimator.estimate(analysis).filter(period="analysis").to_df()
    rows = []
    for number, part in enumerate(chunks(len(analysis), case.chunk_rows)):
        for metric in metrics:
            target = case.analysis_target[part]
            if metric == "rmse":
                realized = float(np.sqrt(mean_squared_error(target, case.analysis_outputs[part])))
            elif metric == "mae":
                realized = float(mean_absolute_error(target, case.analysis_outputs[part]))
            else:
                realized = float(
                    roc_auc_score(target, case.analysis_outputs[part], multi_class="ovr")
                )
            rows.append(
                {
                    "chunk": number,
                    "metric": metric,
                    "realized": realized,
                    "estimated": float(table[(metric, "value")].iloc[number]),
                }
            )
    return pd.DataFrame(rows)


def summary(found: pd.DataFrame) -> pd.DataFrame:
    """Per metric: mean absolute error vs realized, and (driftgate) the share of chunks
    within 1.96 sampling errors and the share reported reliable."""
    found = found.assign(error=(found["estimated"] - found["realized"]).abs())
    columns = {"mae_vs_realized": ("error", "mean"), "chunks": ("error", "size")}
    if "realized_full" in found:
        found = found.assign(full=(found["estimated"] - found["realized_full"]).abs())
        columns["mae_vs_full_probabilities"] = ("full", "mean")
    if "standard_error" in found:
        found = found.assign(inside=found["error"] <= 1.96 * found["standard_error"])
        columns |= {"within_1.96_se": ("inside", "mean"), "reliable": ("reliable", "mean")}
    return found.groupby("metric", sort=False).agg(**columns)


def run(case: Case, metrics: tuple[str, ...], peer: bool) -> dict[str, pd.DataFrame]:
    started = time.perf_counter()
    ours = driftgate_estimates(case, metrics)
    seconds = time.perf_counter() - started
    print(
        f"\n== {case.name}: {len(case.reference)} reference rows, {len(case.analysis)} "
        f"analysis rows in chunks of {case.chunk_rows} ({seconds:.1f} s) =="
    )
    print(ours.to_string(index=False, float_format=lambda v: f"{v:.4g}"))
    print("\ndriftgate, mean absolute error vs realized:")
    print(summary(ours).to_string(float_format=lambda v: f"{v:.4g}"))
    found = {"driftgate": ours}
    if peer and case.nannyml is not None:
        started = time.perf_counter()
        theirs = nannyml_estimates(case, metrics)
        seconds = time.perf_counter() - started
        print(
            f"\nNannyML {_nannyml().__version__}, same chunks ({seconds:.1f} s), "
            "mean absolute error vs realized:"
        )
        print(summary(theirs).to_string(float_format=lambda v: f"{v:.4g}"))
        found["nannyml"] = theirs
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--short", action="store_true", help="scikit-learn's bundled data only")
    args = parser.parse_args()
    cases = [(diabetes_case(), ("rmse", "mae")), (digits_case(), ("roc_auc", "accuracy"))]
    peer = nannyml_available() and not args.short
    if not args.short:
        if peer:
            cases = [
                (car_price_case(), ("rmse", "mae")),
                (credit_card_case(), ("roc_auc",)),
                *cases,
            ]
        else:
            print(
                "NannyML is not installed: its data sets and its figures are skipped "
                "(pip install nannyml==0.13.1 to measure them; not a driftgate dependency)"
            )
    for case, metrics in cases:
        run(case, metrics, peer)


if __name__ == "__main__":
    main()
