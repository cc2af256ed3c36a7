"""The model's outputs as a monitored signal: prediction drift and estimated performance.

The reference profile holds an :class:`OutputsProfile`: the champion's outputs on its
validation split, reduced to the columns the sample store keeps per record (the
``prediction`` value and the ``predicted_class``, see :func:`output_frame`), fitted as
a small :class:`~driftgate.monitors.profile.ReferenceProfile` of their own, and, for
classifiers, a calibrator of those outputs against the validation labels.

Two monitor metrics read it (``docs/monitors.md`` explains both):

* ``prediction_drift``: KS on the output value and chi-squared on the predicted class,
  each at the monitor's per-test level with Bonferroni over the outputs tested (the
  same calibrated, sample-size-aware decision as a feature monitor);
* ``performance_estimate:<metric>``: a confidence-based performance estimate (CBPE, as
  NannyML does it): the calibrated confidence of each window record is its expected
  chance of being right, so the window's expected accuracy and ROC AUC follow from the
  outputs alone, before any label arrives. It breaches when the drop from the
  reference estimate is at least ``threshold`` *and* significant at the monitor's level
  given the window's sampling error.

Nothing is pickled: the calibrator is its isotonic knots in JSON.
"""

from __future__ import annotations

import json
import logging
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from driftgate.monitors.estimates import estimable, get_estimate
from driftgate.monitors.estimates.calibration import (  # noqa: F401 - part of this module's API
    CLASS_COLUMN,
    VALUE_COLUMN,
    Calibrator,
    OutputsError,
    expected_roc_auc,
    hanley_mcneil_se,
)
from driftgate.monitors.estimates.loss_model import feature_frame
from driftgate.monitors.estimates.registry import SPREAD_ROWS  # noqa: F401 - re-exported
from driftgate.monitors.estimates.reliability import Support, support_columns

log = logging.getLogger(__name__)
OUTPUTS_JSON = "outputs.json"
OUTPUTS_PROFILE_DIR = "profile"
OUTPUTS_FORMAT_VERSION = 1
REFERENCE_RESAMPLES = 100


def output_frame(task: str, outputs: np.ndarray, decision_threshold: float) -> pd.DataFrame:
    """The stored columns of raw model ``outputs``, as the service stores them
    (``serving/outputs.py``; tests/monitors/test_outputs.py checks they agree)."""
    outputs = np.asarray(outputs, dtype=np.float64)
    if task == "multiclass":
        index = outputs.argmax(axis=1)
        return pd.DataFrame(
            {VALUE_COLUMN: outputs[np.arange(len(outputs)), index], CLASS_COLUMN: index}
        )
    values = outputs.ravel()
    if task == "regression":
        return pd.DataFrame({VALUE_COLUMN: values})
    return pd.DataFrame(
        {VALUE_COLUMN: values, CLASS_COLUMN: (values >= decision_threshold).astype(int)}
    )


@dataclass(frozen=True)
class Estimate:
    """A window's estimated metric, its sampling error and what it is compared with.

    Two errors, for two questions:

    * ``standard_error``: how far the window's *realized* metric may lie from the
      estimate by chance at this size (accuracy: binomial; ROC AUC: Hanley-McNeil at
      the reference's class balance), as NannyML reports its sampling error: the band
      drawn around an estimate;
    * ``null_error``: how far the *estimate* itself moves between windows of this size
      drawn like the reference (its spread measured on the reference, plus the
      reference estimate's own), which is what a drop is tested against. Estimates
      average confidences, so they move less than realized metrics do.
    """

    metric: str
    value: float
    standard_error: float
    rows: int
    reference_estimate: float
    reference_realized: float
    null_error: float = float("nan")
    null_bias: float = 0.0
    floor: float = 0.0  # the worst value the estimate can take (an error metric: inf)
    higher_is_better: bool = True
    reliability: dict[str, Any] = field(default_factory=dict)

    @property
    def drop(self) -> float:
        """How much worse the estimate is than the reference estimate (below it for a
        score, above it for an error metric), net of the estimate's no-drift bias at
        this window's size (what a breach is decided on)."""
        expected = self.reference_estimate + self.null_bias
        return expected - self.value if self.higher_is_better else self.value - expected

    @property
    def room(self) -> float:
        """The largest drop any window could show (to :attr:`floor`)."""
        expected = self.reference_estimate + self.null_bias
        return expected - self.floor if self.higher_is_better else self.floor - expected

    def to_dict(self) -> dict[str, float | int | str]:
        return {
            "metric": self.metric,
            "estimate": self.value,
            "standard_error": self.standard_error,
            "null_error": self.null_error,
            "null_bias": self.null_bias,
            "floor": self.floor if math.isfinite(self.floor) else None,
            "higher_is_better": self.higher_is_better,
            "rows": self.rows,
            "reference_estimate": self.reference_estimate,
            "reference_realized": self.reference_realized,
            "drop": self.drop,
            "reliability": self.reliability,
        }


@dataclass
class OutputsProfile:
    """The champion's outputs on its validation split, and their calibration.

    Attributes:
        task: ``binary``, ``multiclass`` or ``regression``.
        classes: The classes in output order (empty for regression).
        decision_threshold: P(class 1) at or above which the binary class is 1.
        profile: A reference profile of the stored output columns.
        calibrator: Classifiers: the isotonic calibrator of the outputs (None otherwise).
        realized: The task's estimable metrics realized on the reference split.
        estimated: The same metrics estimated from the calibrated outputs alone.
        spread: Metric -> ``{"rows": [...], "unit_std": [...]}``: the no-drift standard
            deviation of the estimate on windows of those sizes, times ``sqrt(rows)``.
        positive_share: Binary: the reference's share of class 1.
        split: Which split the outputs are from.
        state: Metric -> what the metric fitted beyond the calibrator, as JSON numbers
            (regression: DLE's loss model, :mod:`monitors.estimates.loss_model`).
        support: The reference's support of the features and the output value, what an
            estimate's reliability is checked against (:mod:`monitors.estimates.reliability`;
            the output value only when fitted without features); None on a profile
            fitted before the check (then nothing is checked).
    """

    task: str
    classes: tuple[str, ...]
    decision_threshold: float
    profile: Any  # monitors.profile.ReferenceProfile
    calibrator: Calibrator | None = None
    realized: dict[str, float] = field(default_factory=dict)
    estimated: dict[str, float] = field(default_factory=dict)
    spread: dict[str, dict[str, list[float]]] = field(default_factory=dict)
    positive_share: float | None = None
    split: str = "validation"
    state: dict[str, dict[str, Any]] = field(default_factory=dict)
    support: Support | None = None

    @property
    def rows(self) -> int:
        return self.profile.rows

    @property
    def columns(self) -> list[str]:
        return list(self.profile.features)

    @classmethod
    def fit(
        cls,
        task: str,
        outputs: np.ndarray,
        target: np.ndarray,
        *,
        classes: tuple[str, ...] = (),
        decision_threshold: float = 0.5,
        split: str = "validation",
        features: pd.DataFrame | None = None,
    ) -> OutputsProfile:
        """Profile the ``outputs`` of a reference split and calibrate them on ``target``
        (binary 0/1, multiclass the class index, regression the value); ``features``
        (the split's model inputs, row for row) fit what a metric needs of them (DLE's
        loss model) and the support every estimate's reliability is checked against.
        A metric that cannot be fitted (regression without features) is left out of
        the profile, with a warning: its monitor then says so."""
        from driftgate.monitors.profile import ReferenceProfile

        outputs = np.asarray(outputs, dtype=np.float64)
        if not np.isfinite(outputs).all():
            # A model with NaN/Inf outputs still registers (the gate's finite_outputs
            # check fails it with the evidence); there is nothing sound to profile.
            bad = int((~np.isfinite(outputs)).any(axis=tuple(range(1, outputs.ndim))).sum())
            raise OutputsError(f"{bad} of {len(outputs)} {split} outputs are NaN or infinite")
        frame = output_frame(task, outputs, decision_threshold)
        schema = {VALUE_COLUMN: "numeric"}
        if CLASS_COLUMN in frame:
            schema[CLASS_COLUMN] = "categorical"
        profile = ReferenceProfile.fit(frame, schema, sample_rows=0, metadata={"split": split})
        fitted = cls(
            task=task,
            classes=tuple(str(c) for c in classes),
            decision_threshold=float(decision_threshold),
            profile=profile,
            split=split,
        )
        if features is not None and len(features) != len(frame):
            raise OutputsError(f"{len(features)} rows of features for {len(frame)} {split} outputs")
        supported = frame[support_columns(frame)]
        fitted.support = Support.fit(
            supported if features is None else feature_frame(features, supported)
        )
        if task == "regression":
            target = np.asarray(target, dtype=np.float64)
            outcomes = target
        else:
            target = np.asarray(target).astype(int)
            hits = frame[CLASS_COLUMN].to_numpy() == target
            if task == "binary":
                fitted.calibrator = Calibrator.fit(frame[VALUE_COLUMN].to_numpy(), target)
                fitted.positive_share = float(target.mean())
            if task == "multiclass":
                fitted.calibrator = Calibrator.fit(frame[VALUE_COLUMN].to_numpy(), hits)
            outcomes = target if task == "binary" else hits
        joined = feature_frame(features, frame)
        for metric in estimable(task):
            estimate = get_estimate(task, metric)
            try:
                fitted.state[metric] = estimate.fit(fitted, frame, target, features)
            except OutputsError as exc:
                log.warning("performance_estimate:%s is not profiled: %s", metric, exc)
                continue
            window = joined if estimate.uses_features else frame
            fitted.realized[metric] = estimate.realized(frame, target)
            fitted.estimated[metric] = estimate.value(fitted, window)
            fitted.spread[metric] = _spread(fitted, window, metric, outcomes)
        fitted.state = {m: s for m, s in fitted.state.items() if s}
        return fitted

    def null_error(self, metric: str, rows: int) -> float:
        """The no-drift standard deviation of ``estimate - reference estimate`` on a
        window of ``rows``: the estimate's spread at that size, and the reference
        estimate's own error (``reference_std``: the calibrator is fitted on the
        reference, so its in-sample estimate is off by more than the outputs' spread
        alone; measured by refitting on bootstrap references)."""
        if rows < 1:
            return float("inf")
        spread = self.spread[metric]
        unit = float(np.interp(np.log(rows), np.log(spread["rows"]), spread["unit_std"]))
        reference = spread.get("reference_std", unit / math.sqrt(self.rows))
        return math.sqrt(unit**2 / rows + reference**2)

    def null_bias(self, metric: str, rows: int) -> float:
        """The no-drift mean of ``estimate - reference estimate`` on windows of ``rows``
        (ROC AUC on a few dozen rows is estimated low; accuracy is unbiased: 0)."""
        spread = self.spread[metric]
        if "bias" not in spread or rows < 1:
            return 0.0
        return float(np.interp(np.log(rows), np.log(spread["rows"]), spread["bias"]))

    def realized_error(self, metric: str, rows: int) -> float:
        """Sampling error of the realized ``metric`` on ``rows`` records like the
        reference (binomial for accuracy, Hanley-McNeil for ROC AUC: the metric's own)."""
        return get_estimate(self.task, metric).realized_error(self, rows)

    def estimate(self, frame: pd.DataFrame, metric: str) -> Estimate:
        """The window's ``metric`` estimated from its stored outputs (see the module
        docstring), with the sampling error of a window of its size."""
        if metric not in estimable(self.task):
            raise OutputsError(
                f"performance_estimate:{metric} does not apply to a {self.task} model "
                f"(estimable: {', '.join(estimable(self.task)) or 'none'})"
            )
        rows = len(frame)
        estimated = get_estimate(self.task, metric)
        value = estimated.value(self, frame) if rows else float("nan")
        return Estimate(
            metric=metric,
            value=value,
            standard_error=self.realized_error(metric, rows),
            rows=rows,
            reference_estimate=self.estimated[metric],
            reference_realized=self.realized[metric],
            null_error=self.null_error(metric, rows),
            null_bias=self.null_bias(metric, rows),
            floor=self.floor(metric),
            higher_is_better=estimated.higher_is_better,
            reliability=self.reliability(frame),
        )

    def reliability(self, frame: pd.DataFrame) -> dict[str, Any]:
        """Whether the window lies where the reference did (the estimate's assumption,
        :mod:`monitors.estimates.reliability`); reliable, unchecked, on a profile fitted
        before the check."""
        if self.support is None:
            return {"reliable": True, "checked": 0}
        return self.support.check(frame)

    @property
    def feature_columns(self) -> list[str]:
        """The window columns besides the outputs that the estimates read: the support's
        and the loss models'."""
        columns = []
        if self.support is not None:
            columns += [*self.support.ranges, *self.support.levels]
        for state in self.state.values():
            columns += state.get("loss_model", {}).get("columns", [])
        return [c for c in dict.fromkeys(columns) if c not in self.columns]

    def floor(self, metric: str) -> float:
        """The lowest estimate any window can give (ROC AUC 0.5, the calibrator being
        monotone; accuracy the smallest expected hit the calibrator gives any output)."""
        return get_estimate(self.task, metric).floor(self)

    def save(self, folder: str | Path) -> Path:
        """Write ``outputs.json`` and the outputs' own profile into ``folder``."""
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        self.profile.save(folder / OUTPUTS_PROFILE_DIR)
        document = {
            "format": "driftgate.outputs_profile",
            "format_version": OUTPUTS_FORMAT_VERSION,
            "task": self.task,
            "classes": list(self.classes),
            "decision_threshold": self.decision_threshold,
            "split": self.split,
            "positive_share": self.positive_share,
            "calibrator": None if self.calibrator is None else self.calibrator.to_json(),
            "realized": self.realized,
            "estimated": self.estimated,
            "spread": self.spread,
            "state": self.state,
            "support": None if self.support is None else self.support.to_json(),
        }
        (folder / OUTPUTS_JSON).write_text(json.dumps(document, indent=2, allow_nan=False))
        return folder

    @classmethod
    def load(cls, folder: str | Path) -> OutputsProfile:
        from driftgate.monitors.profile import ReferenceProfile

        folder = Path(folder)
        path = folder / OUTPUTS_JSON
        document = json.loads(path.read_text())
        if (
            document.get("format") != "driftgate.outputs_profile"
            or document.get("format_version") != OUTPUTS_FORMAT_VERSION
        ):
            raise OutputsError(
                f"{path}: unsupported outputs profile {document.get('format')!r} version "
                f"{document.get('format_version')!r} (this driftgate reads version "
                f"{OUTPUTS_FORMAT_VERSION})"
            )
        calibrator = document.get("calibrator")
        support = document.get("support")  # absent: fitted before the reliability check
        return cls(
            task=document["task"],
            classes=tuple(document["classes"]),
            decision_threshold=float(document["decision_threshold"]),
            profile=ReferenceProfile.load(folder / OUTPUTS_PROFILE_DIR),
            calibrator=None if calibrator is None else Calibrator.from_json(calibrator),
            realized={k: float(v) for k, v in document["realized"].items()},
            estimated={k: float(v) for k, v in document["estimated"].items()},
            spread=document.get("spread", {}),
            positive_share=document.get("positive_share"),
            split=document.get("split", "validation"),
            state=document.get("state", {}),
            support=None if support is None else Support.from_json(support),
        )


def realized_metrics(task: str, frame: pd.DataFrame, target: np.ndarray) -> dict[str, float]:
    """The estimable metrics of stored outputs against their labels (binary 0/1,
    multiclass the class index): what the estimate is validated against."""
    return {
        metric: get_estimate(task, metric).realized(frame, target) for metric in estimable(task)
    }


def _reference_std(
    profile: OutputsProfile, frame: pd.DataFrame, metric: str, outcomes: np.ndarray
) -> float:
    """How far an in-sample reference estimate lies from the estimate the same
    calibrator gives the population: calibrators refitted on bootstrap references, each
    estimate on its own reference minus on the whole reference (the population's proxy)."""
    estimate = get_estimate(profile.task, metric)
    rng = np.random.default_rng(1)
    scores = frame[VALUE_COLUMN].to_numpy(dtype=np.float64)
    gaps = []
    for _ in range(REFERENCE_RESAMPLES):
        draw = rng.integers(0, scores.size, scores.size)
        try:
            calibrator = Calibrator.fit(scores[draw], outcomes[draw])
        except OutputsError:  # a resample with one outcome only
            continue
        inside = estimate.value(profile, frame.iloc[draw], calibrator)
        gaps.append(inside - estimate.value(profile, frame, calibrator))
    return float(np.nanstd(gaps)) if len(gaps) > 1 else float("nan")


def _spread(
    profile: OutputsProfile, frame: pd.DataFrame, metric: str, outcomes: np.ndarray
) -> dict[str, Any]:
    """The estimate's no-drift spread (see :attr:`OutputsProfile.spread`, the metric's
    own) and the reference estimate's own error (:func:`_reference_std`)."""
    estimate = get_estimate(profile.task, metric)
    reference = estimate.reference_std(profile, frame, outcomes)
    if reference is None:
        reference = _reference_std(profile, frame, metric, np.asarray(outcomes))
    calibrated = (
        None
        if profile.calibrator is None
        else profile.calibrator(frame[VALUE_COLUMN].to_numpy(dtype=np.float64))
    )
    spread = estimate.spread(profile, frame, calibrated)
    return {**spread, "reference_std": reference}


def detectable_drop(null_error: float, threshold: float, level: float | None) -> float:
    """The smallest drop of an estimate a window flags: the threshold, or (calibrated)
    the drop significant at ``level`` against the no-drift spread ``null_error`` of a
    window of its size, whichever is larger (:func:`decide_estimate`; the plan's)."""
    from scipy import stats  # imported when used (issue 32)

    if level is None:
        return threshold
    return max(threshold, float(stats.norm.isf(level)) * null_error)


def decide_estimate(estimate: Estimate, threshold: float, level: float | None) -> dict[str, Any]:
    """Whether an estimated drop breaches: ``drop >= threshold`` and, calibrated, the
    drop significant at ``level`` (one-sided z test against the estimate's no-drift
    spread at the window's size, :attr:`Estimate.null_error`).

    Returns ``breached``, ``p_value``, ``min_detectable`` (the smallest drop this window
    could flag) and ``insufficient`` (even a drop to :attr:`Estimate.floor` would not
    be significant).
    """
    from scipy import stats  # imported when used (issue 32)

    if level is None:
        return {
            "breached": bool(estimate.drop >= threshold),
            "p_value": None,
            "min_detectable": threshold,
            "insufficient": False,
        }
    error = estimate.null_error
    p_value = float(stats.norm.sf(estimate.drop / error)) if error > 0 else 0.0
    detectable = detectable_drop(error, threshold, level)
    return {
        "breached": bool(estimate.drop >= threshold and p_value <= level),
        "p_value": p_value,
        "min_detectable": detectable,
        # Insufficient: even the lowest possible estimate would not be a significant drop.
        "insufficient": not math.isfinite(detectable) or detectable > estimate.room,
    }


# -- monitors -------------------------------------------------------------------------
def window_outputs(samples: pd.DataFrame, outputs: OutputsProfile) -> pd.DataFrame:
    """The window's stored output columns that the profile has, as profiled (the value
    as a number, the class as its integer), and the feature columns its estimates read
    (:attr:`OutputsProfile.feature_columns`) that the samples hold, as stored."""
    frame = pd.DataFrame(index=samples.index)
    for column in outputs.columns:
        values = pd.to_numeric(samples[column], errors="coerce")
        frame[column] = values if column == VALUE_COLUMN else values.astype("Int64")
    for column in outputs.feature_columns:
        if column in samples:
            frame[column] = samples[column]
    return frame


def _window_frame(monitor, outputs: OutputsProfile | None, samples: pd.DataFrame):
    """The window's output frame and the result fields, or the result that says why
    the window cannot be judged: a profile without outputs (fitted before they were
    profiled) or samples without the output columns are ``insufficient_data``, no
    samples ``no_data``; never a pass and never a crash."""
    from driftgate.monitors.results import MonitorResult

    base = {
        "monitor": monitor.name,
        "metric": monitor.metric,
        "action": monitor.action,
        "threshold": monitor.threshold,
        "breached": False,
        "observed": None,
    }
    if outputs is None:
        return (
            None,
            base,
            MonitorResult(
                **base,
                status="insufficient_data",
                reason="the champion's reference profile has no outputs (fitted before outputs "
                "were profiled): retrain or re-adopt the model to monitor its outputs",
            ),
        )
    absent = [c for c in outputs.columns if c not in samples.columns]
    if absent and len(samples):
        return (
            None,
            base,
            MonitorResult(
                **base,
                status="insufficient_data",
                reason=f"the window's samples have no {', '.join(absent)} column",
            ),
        )
    if not len(samples):
        return (
            None,
            base,
            MonitorResult(**base, status="no_data", reason="no samples in the window"),
        )
    return window_outputs(samples, outputs), base, None


def judge_prediction_drift(monitor, outputs: OutputsProfile | None, samples: pd.DataFrame):
    """A ``prediction_drift`` monitor on one window's samples (every stored column)."""
    frame, base, unjudged = _window_frame(monitor, outputs, samples)
    return unjudged or _prediction_drift(monitor, outputs, frame, base)


def judge_performance_estimate(monitor, outputs: OutputsProfile | None, samples: pd.DataFrame):
    """A ``performance_estimate:<metric>`` monitor on one window's samples; a metric
    that does not apply to the model's task is ``error`` naming both."""
    from driftgate.monitors.results import split_metric

    frame, base, unjudged = _window_frame(monitor, outputs, samples)
    metric = split_metric(monitor.metric)[1]
    return unjudged or _performance_estimate(monitor, outputs, frame, metric, base)


def prediction_tests(outputs: OutputsProfile) -> dict[str, list[str]]:
    """Output column -> the test run on it: KS on the value, chi-squared on the class."""
    return {c: ["ks"] if c == VALUE_COLUMN else ["chi2"] for c in outputs.columns}


def _prediction_drift(monitor, outputs: OutputsProfile, frame: pd.DataFrame, base: dict):
    from driftgate.monitors.drift import check_drift
    from driftgate.monitors.results import MonitorResult

    tests = prediction_tests(outputs)
    # Bonferroni over the outputs tested, through the monitor's own per-test level.
    level = monitor.level(len(tests))
    options: dict[str, Any] = {"thresholds": {"ks": monitor.threshold, "chi2": monitor.threshold}}
    if level is not None:
        options["levels"] = {"ks": level, "chi2": level}
    else:
        options["correction"] = "bonferroni"
    if monitor.effect_size_floor is not None:
        options["effect_size_floor"] = monitor.effect_size_floor
    report = check_drift(outputs.profile, frame, tests=tests, **options)
    evaluated = [r for r in report.results if r.status == "ok"]
    if not evaluated:
        insufficient = any(r.status == "insufficient_data" for r in report.results)
        return MonitorResult(
            **base,
            status="insufficient_data" if insufficient else "no_data",
            reason="; ".join(sorted({r.reason for r in report.results if r.reason})),
            level=level,
        )
    observed = min(
        r.adjusted_p_value if r.adjusted_p_value is not None else r.p_value for r in evaluated
    )
    return MonitorResult(
        **{**base, "breached": any(r.drifted for r in evaluated), "observed": float(observed)},
        breached_features=sorted(r.feature for r in evaluated if r.drifted),
        p_value=min(r.p_value for r in evaluated),
        level=level,
        min_detectable=max(r.min_detectable or 0.0 for r in evaluated) if level else None,
        details={
            # The observed value is the smallest (adjusted) p-value: it breaches below
            # the threshold, and the review's text says so ("p = 7.5e-08 < 0.05").
            "observed": "p_value",
            **{
                f"{r.feature}.{r.test}": {"value": r.value, "effect_size": r.effect_size}
                for r in report.results
            },
        },
        reason="; ".join(r.reason for r in report.results if r.reason),
    )


def _performance_estimate(
    monitor, outputs: OutputsProfile, frame: pd.DataFrame, metric: str, base: dict
):
    from driftgate.monitors.results import MonitorResult

    if metric not in estimable(outputs.task):
        known = ", ".join(estimable(outputs.task)) or "none: it has no confidences"
        return MonitorResult(
            **base,
            status="error",
            reason=f"{monitor.metric} does not apply to this {outputs.task} model "
            f"(estimable: {known})",
        )
    if metric not in outputs.estimated:
        return MonitorResult(
            **base,
            status="error",
            reason=f"{monitor.metric}: the champion's outputs profile holds no reference "
            f"for {metric} (fitted before the metric was registered, or without the "
            f"features it needs; it holds "
            f"{', '.join(outputs.estimated) or 'none'}): train or adopt the model again",
        )
    level = monitor.level(1)
    try:
        estimate = outputs.estimate(frame, metric)
    except OutputsError as exc:  # e.g. the window's samples lack a feature DLE reads
        return MonitorResult(
            **base, status="insufficient_data", reason=f"{metric}: {exc}", level=level
        )
    details = estimate.to_dict()
    if not estimate.reliability.get("reliable", True):
        # The estimate's assumption fails: a number here would be confidently wrong
        # (optimistic under the very shift it is there for), so it is not judged.
        return MonitorResult(
            **base,
            status="insufficient_data",
            reason=f"estimate unreliable: {estimate.reliability['reason']}",
            level=level,
            details=details,
        )
    decision = decide_estimate(estimate, monitor.threshold, level)
    if not math.isfinite(estimate.value) or decision["insufficient"]:
        return MonitorResult(
            **base,
            status="insufficient_data",
            reason=f"{estimate.rows} rows: the estimate's no-drift spread "
            f"({estimate.null_error:.3g}) is too large for any drop of {metric} to be "
            f"significant at level {level:.3g}"
            if math.isfinite(estimate.value)
            else f"{metric} cannot be estimated on this window (one class only)",
            level=level,
            min_detectable=decision["min_detectable"],
            details=details,
        )
    return MonitorResult(
        **{**base, "breached": decision["breached"], "observed": estimate.value},
        p_value=decision["p_value"],
        level=level,
        min_detectable=decision["min_detectable"],
        details=details,
    )
