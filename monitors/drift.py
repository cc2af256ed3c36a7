"""Drift checks: a current window against a reference profile, one result per test.

:func:`check_drift` reduces the window (one DataFrame, or chunks) to counts against the
profile (:mod:`monitors.window`), runs the requested statistics on every feature,
applies an optional multiple-testing correction to the p-values, and decides:

* ``distance`` tests drift when ``value >= threshold``;
* ``p_value`` tests drift when the (corrected) p-value is ``< threshold`` *and* the
  effect size is ``>= effect_size_floor``, so that on large windows a tiny p-value
  alone never flags a negligible shift.

A feature drifts when any of its tests does; the dataset drifts when the share of
drifted features reaches ``drift_share``. Tests that cannot be computed (empty window,
all-NaN column) are reported with ``status="no_data"`` and never count as drift.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

import numpy as np
import pandas as pd

from driftgate.core.errors import DriftgateError
from driftgate.monitors.profile import NumericProfile, ReferenceProfile
from driftgate.monitors.stattests import InsufficientData, get_stattest
from driftgate.monitors.window import NumericWindow, Window, summarise_window

Correction = Literal["bonferroni", "bh"]
CORRECTIONS: tuple[str, ...] = ("bonferroni", "bh")

DEFAULT_TESTS: dict[str, tuple[str, ...]] = {
    "numeric": ("ks", "wasserstein", "missing_share"),
    "categorical": ("chi2", "js", "missing_share"),
}
DEFAULT_DRIFT_SHARE = 0.5


class DriftConfigError(DriftgateError, ValueError):
    """Invalid arguments to a drift check (unknown correction, feature, threshold...)."""


def _json_float(value: float | None) -> float | str | None:
    """JSON has no NaN or infinity: NaN becomes null, infinities the strings 'inf'/'-inf'."""
    if value is None:
        return None
    value = float(value)
    if math.isnan(value):
        return None
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    return value


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, float | np.floating):
        return _json_float(float(value))
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.bool_):
        return bool(value)
    return value


@dataclass
class DriftResult:
    """One statistic on one feature.

    Attributes:
        feature: Column name.
        test: Statistic name (``ks``, ``psi``...).
        value: The statistic in ``units`` (NaN when ``status`` is ``no_data``).
        p_value: Raw p-value (``p_value`` tests only).
        threshold: Compared with ``adjusted_p_value`` (p-value tests) or ``value``.
        drifted: The decision described in the module docstring.
        direction: ``p_value`` or ``distance``.
        units: Units of ``value``.
        feature_type: ``numeric`` or ``categorical``.
        adjusted_p_value: p-value after the correction (equal to ``p_value`` without one).
        effect_size: Effect size of a p-value test (KS D, Cramér's V).
        effect_size_floor: Smallest effect size that may count as drift.
        status: ``ok``, ``no_data`` or ``insufficient_data`` (a calibrated decision
            on a window too small for any outcome to be significant: never drifted).
        reason: Why the result has no data, or empty.
        details: Extra JSON-able facts from the statistic.
        level: Per-test level of a calibrated decision (:mod:`monitors.budget`), or None
            for the bare threshold rule.
        bias_corrected: ``value`` minus its expected no-drift value at this window's
            size (calibrated decisions).
        min_detectable: The smallest value this window could have flagged:
            ``max(threshold, critical value at level)`` in ``units`` (for
            ``missing_share``: the smallest rise of the missing share).
    """

    feature: str
    test: str
    value: float
    p_value: float | None
    threshold: float
    drifted: bool
    direction: str
    units: str
    feature_type: str
    adjusted_p_value: float | None = None
    effect_size: float | None = None
    effect_size_floor: float | None = None
    status: str = "ok"
    reason: str = ""
    details: dict[str, Any] = field(default_factory=dict)
    level: float | None = None
    bias_corrected: float | None = None
    min_detectable: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return _jsonable(asdict(self))


@dataclass
class FeatureInfo:
    """What the window held for one feature.

    Attributes:
        feature: Column name.
        feature_type: ``numeric`` or ``categorical``.
        rows: Rows in the window.
        missing_count: Missing values (NaN / None / NA), never silently dropped.
        missing_share: ``missing_count / rows`` (NaN for an empty window).
        reference_missing_share: The reference's missing share.
        infinite_count: ``+-inf`` values (numeric features).
        unseen_categories: Number of current categories absent from the reference.
        drifted: Any test on the feature drifted.
    """

    feature: str
    feature_type: str
    rows: int
    missing_count: int
    missing_share: float
    reference_missing_share: float
    infinite_count: int = 0
    unseen_categories: int = 0
    drifted: bool = False

    def to_dict(self) -> dict[str, Any]:
        return _jsonable(asdict(self))


@dataclass
class DriftReport:
    """Every result of one drift check and the dataset-level summary.

    Attributes:
        results: One :class:`DriftResult` per feature and test.
        features: Per-feature :class:`FeatureInfo`, in profile order.
        rows: Rows in the window.
        chunks: Chunks read.
        unexpected_columns: Window columns not in the profile (not checked).
        correction: Multiple-testing correction applied, or None.
        drift_share: Share of drifted features at which the dataset drifts.
    """

    results: list[DriftResult]
    features: dict[str, FeatureInfo]
    rows: int
    chunks: int
    unexpected_columns: list[str]
    correction: str | None
    drift_share: float

    @property
    def drifted_features(self) -> list[str]:
        return [name for name, info in self.features.items() if info.drifted]

    @property
    def share_drifted(self) -> float:
        """Drifted features / profiled features (0 when there are none)."""
        return len(self.drifted_features) / len(self.features) if self.features else 0.0

    @property
    def dataset_drifted(self) -> bool:
        return bool(self.features) and self.share_drifted >= self.drift_share

    def result(self, feature: str, test: str) -> DriftResult:
        """The result of ``test`` on ``feature``.

        Raises:
            KeyError: No such result.
        """
        for result in self.results:
            if result.feature == feature and result.test == test:
                return result
        raise KeyError(f"no result for feature {feature!r} and test {test!r}")

    def metrics(self, prefix: str = "drift") -> dict[str, float]:
        """Flat ``{"<prefix>.<feature>.<test>": value}`` of computed values (for MLflow)."""
        metrics = {
            f"{prefix}.{r.feature}.{r.test}": float(r.value)
            for r in self.results
            if r.status in ("ok", "insufficient_data") and math.isfinite(r.value)
        }
        metrics[f"{prefix}.share_drifted"] = self.share_drifted
        return metrics

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form (NaN as null, infinities as ``"inf"``)."""
        return {
            "rows": self.rows,
            "chunks": self.chunks,
            "correction": self.correction,
            "drift_share": self.drift_share,
            "share_drifted": self.share_drifted,
            "dataset_drifted": self.dataset_drifted,
            "drifted_features": self.drifted_features,
            "unexpected_columns": list(self.unexpected_columns),
            "features": {name: info.to_dict() for name, info in self.features.items()},
            "results": [r.to_dict() for r in self.results],
        }


def adjust_p_values(p_values: Sequence[float], correction: str | None) -> list[float]:
    """p-values after a multiple-testing correction.

    Args:
        p_values: Raw p-values of one family of tests.
        correction: None (unchanged), ``"bonferroni"`` (``min(1, m p)``) or ``"bh"``
            (Benjamini-Hochberg step-up adjusted p-values, controlling the false
            discovery rate).

    Raises:
        DriftConfigError: Unknown correction.
    """
    p = np.asarray(p_values, dtype=float)
    if correction is None or p.size == 0:
        return p.tolist()
    m = p.size
    if correction == "bonferroni":
        return np.minimum(p * m, 1.0).tolist()
    if correction == "bh":
        order = np.argsort(p)
        ranked = p[order] * m / np.arange(1, m + 1)
        # Step-up: each adjusted p is the smallest ranked value at or above its rank.
        adjusted_sorted = np.minimum.accumulate(ranked[::-1])[::-1]
        adjusted = np.empty(m)
        adjusted[order] = np.minimum(adjusted_sorted, 1.0)
        return adjusted.tolist()
    raise DriftConfigError(f"unknown correction {correction!r}; known: {list(CORRECTIONS)}")


def _tests_for(
    profile: ReferenceProfile, tests: Sequence[str] | Mapping[str, Sequence[str]] | None
) -> dict[str, list[str]]:
    """Feature -> test names to run on it."""
    if isinstance(tests, str):
        tests = [tests]
    if tests is None:
        return {n: list(DEFAULT_TESTS[f.type]) for n, f in profile.features.items()}
    if isinstance(tests, Mapping):
        unknown_features = [name for name in tests if name not in profile.features]
        if unknown_features:
            raise DriftConfigError(
                f"tests name features not in the profile: {unknown_features}; "
                f"profiled features: {list(profile.features)}"
            )
        plan = {}
        for name, feature in profile.features.items():
            chosen = tests.get(name, DEFAULT_TESTS[feature.type])
            for test in chosen:
                stat = get_stattest(test)
                if not stat.accepts(feature.type):
                    raise DriftConfigError(
                        f"test {test!r} does not accept {feature.type} feature {name!r} "
                        f"(it accepts {list(stat.feature_types)})"
                    )
            plan[name] = list(chosen)
        return plan
    names = list(tests)
    for name in names:
        get_stattest(name)  # fails early, listing the known tests
    # A list applies each test to the features whose type it accepts.
    return {
        feature_name: [t for t in names if get_stattest(t).accepts(feature.type)]
        for feature_name, feature in profile.features.items()
    }


def _per_test(
    option: float | Mapping[str, float] | None, name: str, default: float | None
) -> float | None:
    if option is None:
        return default
    if isinstance(option, Mapping):
        return float(option[name]) if name in option else default
    return float(option)


def check_drift(
    profile: ReferenceProfile,
    current: pd.DataFrame | Iterable[pd.DataFrame],
    tests: Sequence[str] | Mapping[str, Sequence[str]] | None = None,
    correction: Correction | None = None,
    alpha: float = 0.05,
    effect_size_floor: float | Mapping[str, float] | None = None,
    thresholds: Mapping[str, float] | None = None,
    drift_share: float = DEFAULT_DRIFT_SHARE,
    levels: Mapping[str, float] | None = None,
) -> DriftReport:
    """Compare a current window with a reference profile.

    Args:
        profile: The fitted reference profile.
        current: The window: one DataFrame or an iterable of DataFrame chunks (memory
            stays bounded by the profile plus one chunk).
        tests: None for the defaults per feature type (numeric: ks, wasserstein,
            missing_share; categorical: chi2, js, missing_share); a list of test names
            (each applied to the features whose type it accepts); or a mapping
            feature -> test names (unlisted features keep the defaults).
        correction: None, ``"bonferroni"`` or ``"bh"``, applied over all p-value
            results of this check.
        alpha: Threshold of the p-value tests not listed in ``thresholds``.
        effect_size_floor: A float for every p-value test, a mapping test -> floor, or
            None for each test's default (ks: D >= 0.05, chi2: Cramér's V >= 0.1). 0
            disables the floor.
        thresholds: Test name -> threshold, overriding ``alpha`` (p-value tests) or the
            test's default (distance tests).
        drift_share: Share of drifted features at which the dataset drifts.
        levels: Test name -> per-test level: those tests are decided calibrated to the
            window's size (:mod:`monitors.nulls`): drifted when over the threshold
            (p-value tests: the effect-size floor) *and* p-value <= level.

    Returns:
        The report with one result per feature and test.

    Raises:
        MissingColumnError: The window lacks a profiled column (the error names it).
        UnknownStatTestError: A test name is unknown (the error lists the known ones).
        DriftConfigError: An invalid correction, threshold, feature or share.
    """
    _validated_plan(profile, tests, correction, alpha, drift_share, thresholds)  # before any read
    return check_drift_counts(
        profile,
        summarise_window(profile, current),
        tests,
        correction,
        alpha,
        effect_size_floor,
        thresholds,
        drift_share,
        levels,
    )


def check_drift_counts(
    profile: ReferenceProfile,
    window: Window,
    tests: Sequence[str] | Mapping[str, Sequence[str]] | None = None,
    correction: Correction | None = None,
    alpha: float = 0.05,
    effect_size_floor: float | Mapping[str, float] | None = None,
    thresholds: Mapping[str, float] | None = None,
    drift_share: float = DEFAULT_DRIFT_SHARE,
    levels: Mapping[str, float] | None = None,
) -> DriftReport:
    """:func:`check_drift` on a window already reduced to counts.

    For a window summarised once and judged several times (one check per group of
    monitors), or summarised in parts elsewhere (:mod:`monitors.partitions`). The
    window must cover every feature the tests run on.
    """
    plan = _validated_plan(profile, tests, correction, alpha, drift_share, thresholds)
    plan = {name: tests for name, tests in plan.items() if tests}
    absent = [name for name in plan if name not in window.features]
    if absent:
        raise DriftConfigError(f"the window was not summarised for features {absent}")
    return evaluate_window(
        profile,
        window,
        plan,
        correction,
        alpha,
        effect_size_floor,
        dict(thresholds or {}),
        drift_share,
        dict(levels or {}),
    )


def _validated_plan(
    profile: ReferenceProfile,
    tests: Sequence[str] | Mapping[str, Sequence[str]] | None,
    correction: str | None,
    alpha: float,
    drift_share: float,
    thresholds: Mapping[str, float] | None,
) -> dict[str, list[str]]:
    """Check the arguments of a drift check (before any data is read); feature -> tests."""
    if correction is not None and correction not in CORRECTIONS:
        raise DriftConfigError(f"unknown correction {correction!r}; known: {list(CORRECTIONS)}")
    if not 0 < alpha < 1:
        raise DriftConfigError(f"alpha must be between 0 and 1, got {alpha}")
    if not 0 < drift_share <= 1:
        raise DriftConfigError(f"drift_share must be in (0, 1], got {drift_share}")
    for name in thresholds or {}:
        get_stattest(name)
    return _tests_for(profile, tests)


def _decide_calibrated(result: DriftResult, reference, counts, level: float) -> None:
    """Drifted when over the threshold (p-value tests: the effect-size floor) and
    significant at ``level`` for this window's size; ``insufficient_data`` when no
    outcome of this size could be. The statistic's own null decides
    (``StatTest.null``, :mod:`monitors.nulls`); one without a null is decided on its
    threshold alone and says so (``details["calibrated"] = False``)."""
    null = get_stattest(result.test).null
    result.level = level
    if null is None:
        result.details["calibrated"] = False
        result.drifted = bool(result.value >= result.threshold)
        return
    outcome = null.calibrate(result.test, result, reference, counts, level)
    result.p_value = result.adjusted_p_value = outcome.p_value
    result.bias_corrected = outcome.bias_corrected
    result.min_detectable = outcome.min_detectable
    if outcome.insufficient:
        result.status, result.reason = "insufficient_data", outcome.reason
        return
    result.drifted = bool(null.over(result) and outcome.p_value <= level)


def evaluate_window(
    profile: ReferenceProfile,
    window: Window,
    plan: Mapping[str, Sequence[str]],
    correction: str | None,
    alpha: float,
    effect_size_floor: float | Mapping[str, float] | None,
    thresholds: Mapping[str, float],
    drift_share: float,
    levels: Mapping[str, float] | None = None,
) -> DriftReport:
    """Run the planned tests on summarised window counts (see :func:`check_drift`)."""
    levels = levels or {}
    for test_name, level in levels.items():
        if not 0 < level < 1:
            raise DriftConfigError(f"level of {test_name!r} must be in (0, 1), got {level}")
    results: list[DriftResult] = []
    for name, test_names in plan.items():
        reference, counts = profile.features[name], window.features[name]
        for test_name in test_names:
            stat = get_stattest(test_name)
            if stat.direction == "p_value":
                threshold = float(thresholds.get(test_name, alpha))
                floor = _per_test(effect_size_floor, test_name, stat.default_effect_size_floor)
            else:
                threshold = float(thresholds.get(test_name, stat.default_threshold))
                floor = None
            result = DriftResult(
                feature=name,
                test=test_name,
                value=float("nan"),
                p_value=None,
                threshold=threshold,
                drifted=False,
                direction=stat.direction,
                units=stat.units,
                feature_type=reference.type,
                effect_size_floor=floor,
            )
            try:
                outcome = stat.func(reference, counts)
            except InsufficientData as exc:
                result.status, result.reason = "no_data", str(exc)
            else:
                result.value = outcome.value
                result.p_value = outcome.p_value
                result.effect_size = outcome.effect_size
                result.details = dict(outcome.details)
                if test_name in levels:
                    _decide_calibrated(result, reference, counts, levels[test_name])
            results.append(result)

    tested = [
        r for r in results if r.direction == "p_value" and r.status == "ok" and r.level is None
    ]
    adjusted = adjust_p_values([r.p_value for r in tested], correction)
    for result, p_adjusted in zip(tested, adjusted, strict=True):
        result.adjusted_p_value = p_adjusted
        large_enough = result.effect_size_floor is None or (
            result.effect_size is not None and result.effect_size >= result.effect_size_floor
        )
        result.drifted = bool(p_adjusted < result.threshold and large_enough)
    for result in results:
        if result.direction == "distance" and result.status == "ok" and result.level is None:
            result.drifted = bool(result.value >= result.threshold)

    features: dict[str, FeatureInfo] = {}
    for name, reference in profile.features.items():
        if name not in window.features:  # a window summarised for some features only
            continue
        counts = window.features[name]
        infinite = (
            counts.neg_inf_count + counts.pos_inf_count if isinstance(counts, NumericWindow) else 0
        )
        unseen = (
            0
            if isinstance(reference, NumericProfile)
            else sum(1 for k in counts.category_counts if k not in reference.category_counts)
        )
        features[name] = FeatureInfo(
            feature=name,
            feature_type=reference.type,
            rows=counts.rows,
            missing_count=counts.missing_count,
            missing_share=counts.missing_share,
            reference_missing_share=reference.missing_share,
            infinite_count=infinite,
            unseen_categories=unseen,
            drifted=any(r.drifted for r in results if r.feature == name),
        )
    return DriftReport(
        results=results,
        features=features,
        rows=window.rows,
        chunks=window.chunks,
        unexpected_columns=list(window.unexpected_columns),
        correction=correction,
        drift_share=drift_share,
    )
