"""``promotion.recent``: candidate and champion judged on the newest labelled production rows.

The configured test split is the past: a retrain's data adds a window of production to
it, but the reference period's rows dominate it, and a candidate worse than the champion
on what production is now could pass on them (issue 29: the demo promoted a v2 with a
realized accuracy of 0.53, below the 0.65 of always answering "no rain"). The recent
slice is the held-out split's labelled production rows (newest ``rows`` of them),
reported apart from the split, and the candidate must be better than the champion there
beyond its sampling error (:mod:`driftgate.gates.paired`).
"""

from __future__ import annotations

import numpy as np

from driftgate.gates.config import RecentSlice
from driftgate.gates.paired import compare_paired, row_losses
from driftgate.gates.result import CheckResult, fmt, not_applicable

DEFAULT_ROW_METRIC = {"binary": "accuracy", "multiclass": "accuracy", "regression": "rmse"}
CHECK = "recent_vs_champion"


def recent_metric(settings: RecentSlice, task: str) -> str:
    return settings.metric or DEFAULT_ROW_METRIC[task]


def _shown(metric: str, losses: np.ndarray) -> float:
    """The metric from its per-row losses (accuracy from errors, rmse from squares)."""
    mean = float(np.mean(losses))
    if metric == "accuracy":
        return 1.0 - mean
    if metric == "rmse":
        return float(np.sqrt(mean))
    return mean


def judge_recent(
    settings: RecentSlice,
    task: str,
    targets: np.ndarray | None,
    candidate_outputs: np.ndarray | None,
    champion_outputs: np.ndarray | None,
    decision_threshold: float,
    *,
    missing_reason: str = "",
) -> list[CheckResult]:
    """The recent slice's results for the gate report.

    ``targets`` None (or fewer than ``min_rows``): not applicable, with why; the other
    gates decide. No champion: the slice's metric is shown, nothing compared (the
    ``trivial_baseline`` check still judges the candidate there).
    """
    metric = recent_metric(settings, task)
    name = f"recent_{metric}"
    rows = 0 if targets is None else len(targets)
    if targets is None or rows < settings.min_rows:
        why = missing_reason or (
            f"{rows} labelled production row(s) in the held-out split, fewer than "
            f"promotion.recent.min_rows {settings.min_rows}"
        )
        return [not_applicable(CHECK, why, group="promotion")]
    if not np.isfinite(np.asarray(candidate_outputs, np.float64)).all():
        return [
            CheckResult(
                CHECK,
                False,
                "non-finite outputs",
                "finite",
                "the candidate's outputs on the recent slice are not all finite",
                group="promotion",
            )
        ]
    candidate_loss = row_losses(task, metric, targets, candidate_outputs, decision_threshold)
    value = _shown(metric, candidate_loss)
    if champion_outputs is None:
        return [
            CheckResult(
                name,
                True,
                f"{fmt(value)} ({rows} rows)",
                "shown; no champion to compare",
                group="promotion",
            )
        ]
    champion_loss = row_losses(task, metric, targets, champion_outputs, decision_threshold)
    versus = compare_paired(candidate_loss, champion_loss, settings.confidence)
    champion_value = _shown(metric, champion_loss)
    observed = (
        f"{fmt(value)} vs champion {fmt(champion_value)} on {rows} recent rows "
        f"(p {versus.p_value:.3g})"
    )
    bar = f"better, p <= {1 - settings.confidence:.3g}"
    message = (
        ""
        if versus.better
        else f"on the {rows} newest labelled production rows the candidate's {metric} "
        f"{fmt(value)} is not better than the champion's {fmt(champion_value)} beyond "
        f"sampling error (one-sided paired test p {versus.p_value:.3g} > "
        f"{1 - settings.confidence:.3g}); refused whatever the configured split says"
    )
    return [CheckResult(CHECK, versus.better, observed, bar, message, group="promotion")]
