"""The drift check's ``record`` step (5 of :data:`driftgate.jobs.drift_check.STEPS`):
the window's evidence logged as one MLflow run (a metric per feature and test, each
monitor's numbers, the contract result and the drift report) and kept as report files
under home, then each monitor's hysteresis state advanced in the monitor-state store.

The run is logged before any state changes or action, so that every action links to
its evidence (``runs:/<id>``); a failure here leaves the window unjudged, and the next
run judges it again.
"""

from __future__ import annotations

import json
import math
import tempfile
from pathlib import Path

import numpy as np

from driftgate import registry
from driftgate.config import ProjectConfig
from driftgate.jobs.window_types import Decision, WindowSamples, WindowVerdict
from driftgate.monitors.kinds import kind_of
from driftgate.monitors.results import MonitorResult
from driftgate.monitors.rules import Monitor
from driftgate.stores.factories import monitor_state_store


def record(
    config: ProjectConfig,
    window: WindowSamples,
    decision: Decision,
    contract_result,
    monitors: list[Monitor],
) -> WindowVerdict:
    """Log the evidence (MLflow run, report files), then advance the hysteresis state."""
    verdict = WindowVerdict(
        model_name=window.model_name,
        model_version=window.model_version,
        start=window.start,
        end=window.end,
        rows=window.rows,
        contract_passed=None if contract_result is None else contract_result.passed,
        results=decision.results,
        firings={},
        drift_metrics=decision.evidence.metrics(),
    )
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch)
        artifacts = _write_evidence(config, window, decision, contract_result, folder)
        verdict.run_id = _log_evidence_run(config, window, verdict, artifacts)
        verdict.report_dir = _keep_reports(config, verdict, folder, monitors)
    # The hysteresis state advances only once the evidence is logged: a run that
    # fails before this point leaves the window unjudged, so the next run judges it
    # again (catch-up) instead of remembering a breach no action was taken on.
    _advance_hysteresis(config, verdict, monitors)
    return verdict


def _write_evidence(
    config: ProjectConfig, window: WindowSamples, decision: Decision, contract_result, folder
) -> dict[str, Path]:
    """The window's evidence files in ``folder`` (drift report, monitor results, the
    contract result), by artifact name; the Evidently report comes later (``window_report``)."""
    from driftgate.data_contracts import render_html, render_markdown

    (folder / "drift.json").write_text(json.dumps(decision.evidence.to_dict(), indent=2))
    (folder / "monitors.json").write_text(
        json.dumps([r.to_dict() for r in decision.results], indent=2, default=str)
    )
    artifacts = {"drift": folder / "drift.json", "monitors": folder / "monitors.json"}
    if contract_result is not None:
        (folder / "contract.md").write_text(render_markdown(contract_result))
        (folder / "contract.html").write_text(render_html(contract_result))
        artifacts["contract"] = folder / "contract.md"
        artifacts["contract_html"] = folder / "contract.html"
    return artifacts


def _log_evidence_run(
    config: ProjectConfig, window: WindowSamples, verdict: WindowVerdict, artifacts
) -> str:
    """One MLflow run for the window: its parameters, metrics, tags and evidence files."""
    name, version, start, end = (
        verdict.model_name,
        verdict.model_version,
        verdict.start,
        verdict.end,
    )
    results = verdict.results
    return registry.log_monitoring_run(
        config.tracking,
        config.monitoring.experiment,
        f"{name}-v{version} {start:%Y-%m-%d %H:%M}..{end:%Y-%m-%d %H:%M}",
        params={
            "model_name": name,
            "model_version": version,
            "rows": window.rows,
            "estimated_records": round(window.estimated_records or window.rows, 1),
            "sample_fraction": window.sample_fraction,
            "window_start": start.isoformat(),
            "window_end": end.isoformat(),
        },
        metrics={
            **verdict.drift_metrics,
            "rows": float(window.rows),
            **_traffic_metrics(window.traffic),
            **_monitor_metrics(results),
        },
        tags={
            "driftgate.model_name": name,
            "driftgate.model_version": version,
            "driftgate.window_start": start.isoformat(),
            "driftgate.window_end": end.isoformat(),
            "driftgate.breached": ",".join(verdict.breached) or "-",
            "driftgate.insufficient_data": ",".join(
                r.monitor for r in results if r.status == "insufficient_data"
            )
            or "-",
            "driftgate.contract": str(verdict.contract_passed),
        },
        artifacts=artifacts,
    )


def _traffic_metrics(traffic) -> dict[str, float]:
    if traffic is None:  # a window read from files
        return {}
    return {
        "rejected_rows": float(traffic.rejected),
        "rejected_overflow": float(traffic.overflow),
        "requests": float(traffic.requests),
    }


def _monitor_metrics(results: list[MonitorResult]) -> dict[str, float]:
    """Each monitor's numbers as ``monitor.<name>.<key>`` metrics."""
    return {
        **{f"monitor.{r.monitor}.observed": r.observed for r in results if r.observed is not None},
        **{f"monitor.{r.monitor}.breached": float(r.breached) for r in results},
        **{
            f"monitor.{r.monitor}.insufficient_data": float(r.status == "insufficient_data")
            for r in results
        },
        **{
            f"monitor.{r.monitor}.{key}": float(getattr(r, key))
            for r in results
            # performance monitors: label count, realized metric, baseline
            for key in (
                "p_value",
                "level",
                "bias_corrected",
                "min_detectable",
                "effect_size_floor",
                "labels",
                "realized",
                "baseline",
            )
            if getattr(r, key) is not None and np.isfinite(getattr(r, key))
        },
        # An estimated metric's estimate, sampling error and reference, for the MLflow
        # compare view beside the realized metrics.
        **{
            f"monitor.{r.monitor}.{key}": float(value)
            for r in results
            for key, value in r.details.items()
            if isinstance(value, int | float) and math.isfinite(value)
        },
    }


def _keep_reports(
    config: ProjectConfig, verdict: WindowVerdict, folder: Path, monitors: list[Monitor]
) -> Path:
    """The evidence files copied under home, with the verdict's summary."""
    start, end = verdict.start, verdict.end
    # Named after the monitors too: two deployments judging the same window for
    # different monitors must not overwrite each other's evidence.
    report_dir = (
        config.home_dir
        / "reports"
        / "drift"
        / f"{start:%Y%m%dT%H%M}-{end:%Y%m%dT%H%M}-{'-'.join(m.name for m in monitors)}"[:200]
    )
    report_dir.mkdir(parents=True, exist_ok=True)
    for path in folder.iterdir():
        (report_dir / path.name).write_bytes(path.read_bytes())
    (report_dir / "summary.md").write_text(verdict.markdown())
    return report_dir


def _advance_hysteresis(
    config: ProjectConfig, verdict: WindowVerdict, monitors: list[Monitor]
) -> None:
    """Each monitor's consecutive-breach state and latest status, into ``verdict.firings``."""
    by_name = {m.name: m for m in monitors}
    window = {
        "model_name": verdict.model_name,
        "model_version": verdict.model_version,
        "window_start": verdict.start,
        "window_end": verdict.end,
    }
    state = monitor_state_store(config)
    try:
        for result in verdict.results:
            # A performance window is judged again as its labels arrive: its own ledger.
            rejudged = kind_of(result.metric).rejudged_as_labels_arrive
            step = state.advance_performance if rejudged else state.advance
            firing = step(monitor=by_name[result.monitor], result=result, **window)
            verdict.firings[result.monitor] = firing
            state.record_status(result=result, firing=firing, **window)
    finally:
        state.close()
