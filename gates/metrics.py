"""Metric gates: an absolute floor (or ceiling) and the comparison with the champion."""

from __future__ import annotations

import math

from driftgate.gates.config import MetricGate
from driftgate.gates.result import CheckResult, fmt

# Comparisons forgive float rounding: (0.5 - 0.45) / 0.5 is 0.09999999999999998, and
# a candidate exactly at a 10% bar must pass it.
ROUNDING = 1e-12


def evaluate_metric_gate(
    gate: MetricGate,
    split: str,
    candidate: dict[str, float],
    champion: dict[str, float] | None,
) -> list[CheckResult]:
    """One CheckResult per configured condition of ``gate``.

    ``candidate`` and ``champion`` map metric names (``roc_auc``...) to values measured
    on the same held-out rows. Comparisons with the champion are skipped (not failed)
    when there is no champion: the first model is promoted on absolute gates alone.
    """
    name = f"{split}_{gate.metric}"
    value = candidate[gate.metric]
    better = "higher" if gate.greater_is_better else "lower"
    results: list[CheckResult] = []

    def result(check: str, passed: bool, observed: str, threshold: str, why: str) -> CheckResult:
        return CheckResult(
            name=check,
            passed=passed,
            observed=observed,
            threshold=threshold,
            message="" if passed else why,
            group="promotion",
        )

    if math.isnan(value):
        return [result(name, False, "nan", "finite", f"{name} is NaN (single-class split?)")]

    if gate.threshold is not None:
        ok = (
            value >= gate.threshold - ROUNDING
            if gate.greater_is_better
            else value <= gate.threshold + ROUNDING
        )
        sign = ">=" if gate.greater_is_better else "<="
        results.append(
            result(
                name,
                ok,
                fmt(value),
                f"{sign} {fmt(gate.threshold)}",
                f"{name} {fmt(value)} is {'below' if gate.greater_is_better else 'above'} "
                f"the threshold {fmt(gate.threshold)} ({better} is better)",
            )
        )
    if champion is None:
        return results

    reference = champion[gate.metric]
    # Signed improvement: positive means the candidate is better.
    improvement = (value - reference) if gate.greater_is_better else (reference - value)
    if gate.min_absolute_change is not None:
        ok = improvement >= gate.min_absolute_change - ROUNDING
        results.append(
            result(
                f"{name}_vs_champion_abs",
                ok,
                f"{improvement:+.4f} ({fmt(value)} vs {fmt(reference)})",
                f">= {gate.min_absolute_change:+.4f}",
                f"candidate improves {name} by {improvement:+.4f} over the champion; "
                f"needs {gate.min_absolute_change:+.4f} ({better} is better)",
            )
        )
    if gate.min_relative_change is not None:
        if reference:
            relative = improvement / abs(reference)
        else:  # no scale to be relative to: only the sign of the change counts
            relative = 0.0 if improvement == 0 else math.copysign(math.inf, improvement)
        ok = relative >= gate.min_relative_change - ROUNDING
        results.append(
            result(
                f"{name}_vs_champion_rel",
                ok,
                f"{relative:+.2%} ({fmt(value)} vs {fmt(reference)})",
                f">= {gate.min_relative_change:+.2%}",
                f"candidate improves {name} by {relative:+.2%} relative to the champion; "
                f"needs {gate.min_relative_change:+.2%} ({better} is better)",
            )
        )
    return results
