"""The drift-check job: judge one window of production samples and act on it.

For a window ``[start, end)``:
1. read the samples (sample store, or Parquet/CSV files with a timestamp column);
2. validate them against the data contract (Great Expectations);
3. compute every drift statistic against the champion's reference profile, and, for
   the decisions, one check per group of monitors with their own thresholds;
4. evaluate each monitor on the window;
5. log an MLflow run (one metric per feature and test; the Evidently HTML report, the
   contract result and the drift report as artifacts; tags naming model and window);
6. count consecutive breaches (hysteresis, stored) and take the actions of the
   monitors that fire: open (or update) a review, pause inference, notify — each
   idempotent for the same window.

The MLflow run is logged before any state changes or action, so that every action
links to its evidence; if anything before that fails, nothing is recorded and no
action is taken on partial results, and the next run judges the window again
(catch-up: :func:`plan_recent`).
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from driftgate import registry
from driftgate.config import ProjectConfig
from driftgate.gates.config import GateConfig, Monitor
from driftgate.gates.monitoring import (
    CONTRACT_PREFIX,
    Firing,
    MonitorResult,
    drift_tests_of,
    evaluate_monitor,
    group_by_threshold,
)
from driftgate.monitors.partitions import Mapper
from driftgate.stores.samples import to_utc

log = logging.getLogger(__name__)

# Every statistic logged per feature for people and the MLflow compare view; decisions
# come from the monitors' own checks.
EVIDENCE_TESTS = ("ks", "kl", "psi", "js", "wasserstein", "missing_share", "mean_shift")
WEBHOOK_ENV = "DRIFTGATE_WEBHOOK_URL"
ACTOR = "drift-check"


@dataclass
class ActionTaken:
    monitor: str
    action: str
    detail: str
    review_id: str | None = None
    changed: bool = True


@dataclass
class WindowVerdict:
    model_name: str
    model_version: str
    start: pd.Timestamp
    end: pd.Timestamp
    rows: int
    contract_passed: bool | None
    results: list[MonitorResult]
    firings: dict[str, Firing]
    actions: list[ActionTaken] = field(default_factory=list)
    run_id: str | None = None
    drift_metrics: dict[str, float] = field(default_factory=dict)
    report_dir: Path | None = None

    @property
    def breached(self) -> list[str]:
        return [r.monitor for r in self.results if r.breached]

    def to_summary(self) -> dict:
        """JSON-able: window, rows, breaches, actions, run id, report path."""
        return {
            "window": [self.start.isoformat(), self.end.isoformat()],
            "rows": self.rows,
            "model_version": self.model_version,
            "breached": self.breached,
            "actions": [a.__dict__ for a in self.actions],
            "run_id": self.run_id,
            "report": str(self.report_dir / "summary.md") if self.report_dir else None,
            "metrics": self.drift_metrics,
        }

    def summary_rows(self) -> list[dict]:
        return [
            {
                "monitor": r.monitor,
                "metric": r.metric,
                "observed": "-" if r.observed is None else f"{r.observed:.4g}",
                "threshold": f"{r.threshold:g}",
                "status": r.status,
                "breached": r.breached,
                "consecutive": self.firings[r.monitor].consecutive
                if r.monitor in self.firings
                else 0,
                "fired": self.firings[r.monitor].fire if r.monitor in self.firings else False,
                "features": ", ".join(r.breached_features),
                "action": r.action,
            }
            for r in self.results
        ]

    def markdown(self) -> str:
        contract = {True: "passed", False: "FAILED", None: "not checked"}[self.contract_passed]
        columns = (
            "monitor",
            "metric",
            "observed",
            "threshold",
            "status",
            "breached",
            "consecutive",
            "fired",
            "features",
        )
        lines = [
            f"# Drift check {self.model_name} v{self.model_version}: {self.start} .. {self.end}",
            "",
            f"{self.rows} rows; contract {contract}; MLflow run {self.run_id or '-'}",
            "",
            "| " + " | ".join(columns) + " |",
            "|" + "---|" * len(columns),
        ]
        for row in self.summary_rows():
            lines.append("| " + " | ".join(str(row[c]) for c in columns) + " |")
        if self.actions:
            lines += ["", "Actions:"]
            lines += [f"- {a.monitor}: {a.action} — {a.detail}" for a in self.actions]
        return "\n".join(lines) + "\n"


def parse_duration(text: str) -> pd.Timedelta:
    """``30m``, ``1h``, ``7d`` -> Timedelta (the monitors' ``window`` syntax)."""
    unit = {"s": "s", "m": "min", "h": "h", "d": "D"}[text[-1]]
    return pd.Timedelta(int(text[:-1]), unit=unit)


def open_reader(config: ProjectConfig, source: str | None = None):
    """The sample store of the service, or ``source``: a store URL or a Parquet/CSV path."""
    from driftgate.stores.samples import open_sample_reader

    return open_sample_reader(source or config.serving.sample_store(config.home_dir))


def review_store(config: ProjectConfig):
    from driftgate.stores.reviews import ReviewStore

    url = config.monitoring.review_store_url or config.serving.control_store(config.home_dir)
    return ReviewStore(url, sqlite_synchronous=config.serving.sqlite_synchronous)


def control_store(config: ProjectConfig):
    from driftgate.stores.control import ControlStore

    return ControlStore(
        config.serving.control_store(config.home_dir),
        sqlite_synchronous=config.serving.sqlite_synchronous,
    )


def load_champion_profile(config: ProjectConfig, version: str):
    """The reference profile of ``version``, cached under home (profiles are immutable)."""
    from driftgate.monitors.profile import ReferenceProfile

    cache = config.home_dir / "profiles" / f"{config.model.name}-v{version}"
    folder = cache / registry.REFERENCE_PROFILE_ARTIFACT
    if not (folder / "profile.json").is_file():
        cache.mkdir(parents=True, exist_ok=True)
        folder = registry.download_reference_profile(
            config.tracking, config.model.name, version, cache
        )
    return ReferenceProfile.load(folder)


def _features_frame(window: pd.DataFrame, features: list[str]) -> pd.DataFrame:
    """The profiled features; a column absent from every sample is all missing (so the
    missing-share monitors see a sensor that went silent) rather than an error."""
    frame = pd.DataFrame(index=window.index)
    for name in features:
        frame[name] = (
            pd.to_numeric(window[name], errors="coerce") if name in window.columns else np.nan
        )
    return frame


def judge_window(
    config: ProjectConfig,
    gates: GateConfig,
    start,
    end,
    *,
    monitors: list[Monitor] | None = None,
    source: str | None = None,
    mapper: Mapper | None = None,
) -> WindowVerdict:
    """Judge ``[start, end)`` with ``monitors`` (default: all of the gate config) and act.

    ``mapper`` summarises the window's cells (row slices x feature groups, sized by
    ``monitoring.partition_rows`` and ``feature_groups``): in this process by default;
    the drift-check flow passes one that runs them on a Dask cluster. Either way the
    statistics are the same, bit for bit (:mod:`monitors.partitions`).
    """
    from driftgate.data_contracts import Contract, render_html, render_markdown, validate_batch
    from driftgate.monitors import check_drift_counts
    from driftgate.monitors.partitions import (
        feature_groups,
        row_slices,
        summarise_in_process,
        summarise_parts,
    )

    start, end = to_utc(start), to_utc(end)
    monitors = list(gates.monitors if monitors is None else monitors)
    name = config.model.name
    version = registry.alias_version(config.tracking, name, registry.CHAMPION_ALIAS)
    if version is None:
        raise registry.RegistryError(f"model '{name}' has no champion to monitor")
    profile = load_champion_profile(config, version)
    features = list(profile.features)
    window = open_reader(config, source).read_window(start, end)
    current = _features_frame(window, features)
    enough = len(current) >= max(config.monitoring.min_rows, 1)

    contract_result = None
    if config.data.contract is not None:
        contract = Contract.load(config.data.contract)
        present = [c for c in contract.columns if c in window.columns]
        contract_result = validate_batch(contract, window[present])

    # Summarised once; each check below only runs statistics on the counts.
    counts = summarise_parts(
        profile,
        row_slices(current, config.monitoring.partition_rows),
        feature_groups(features, config.monitoring.feature_groups),
        mapper=mapper or summarise_in_process,
    )
    results: list[MonitorResult] = []
    evidence_report = check_drift_counts(profile, counts, tests=list(EVIDENCE_TESTS))
    for group in group_by_threshold(monitors):
        report = check_drift_counts(
            profile,
            counts,
            tests=sorted({m.metric for m in group}),
            thresholds=drift_tests_of(group),
        )
        results.extend(evaluate_monitor(m, drift_report=report) for m in group)
    results.extend(
        evaluate_monitor(m, contract_result=contract_result)
        for m in monitors
        if m.metric.startswith(CONTRACT_PREFIX)
    )
    if not enough:
        results = [
            MonitorResult(
                **{
                    **r.__dict__,
                    "breached": False,
                    "status": "no_data",
                    "reason": f"{len(current)} rows < monitoring.min_rows",
                }
            )
            for r in results
        ]
    order = {m.name: i for i, m in enumerate(monitors)}
    results.sort(key=lambda r: order[r.monitor])

    verdict = WindowVerdict(
        model_name=name,
        model_version=version,
        start=start,
        end=end,
        rows=len(current),
        contract_passed=None if contract_result is None else contract_result.passed,
        results=results,
        firings={},
        drift_metrics=evidence_report.metrics(),
    )
    reviews = review_store(config)
    by_name = {m.name: m for m in monitors}
    try:
        with tempfile.TemporaryDirectory() as scratch:
            folder = Path(scratch)
            (folder / "drift.json").write_text(json.dumps(evidence_report.to_dict(), indent=2))
            (folder / "monitors.json").write_text(
                json.dumps([r.to_dict() for r in results], indent=2, default=str)
            )
            artifacts = {"drift": folder / "drift.json", "monitors": folder / "monitors.json"}
            if contract_result is not None:
                (folder / "contract.md").write_text(render_markdown(contract_result))
                (folder / "contract.html").write_text(render_html(contract_result))
                artifacts["contract"] = folder / "contract.md"
                artifacts["contract_html"] = folder / "contract.html"
            if config.monitoring.evidently_report and len(current) > 0:
                from driftgate.monitors.report import render_evidently_report

                try:
                    artifacts["report"] = render_evidently_report(
                        profile, current, folder / "evidently.html"
                    )
                except Exception as exc:  # a report for people must not block the decision
                    log.warning("Evidently report not rendered: %s", exc)
            verdict.run_id = registry.log_monitoring_run(
                config.tracking,
                config.monitoring.experiment,
                f"{name}-v{version} {start:%Y-%m-%d %H:%M}..{end:%Y-%m-%d %H:%M}",
                params={
                    "model_name": name,
                    "model_version": version,
                    "rows": len(current),
                    "window_start": start.isoformat(),
                    "window_end": end.isoformat(),
                },
                metrics={
                    **verdict.drift_metrics,
                    "rows": float(len(current)),
                    **{
                        f"monitor.{r.monitor}.observed": r.observed
                        for r in results
                        if r.observed is not None
                    },
                    **{f"monitor.{r.monitor}.breached": float(r.breached) for r in results},
                },
                tags={
                    "driftgate.model_name": name,
                    "driftgate.model_version": version,
                    "driftgate.window_start": start.isoformat(),
                    "driftgate.window_end": end.isoformat(),
                    "driftgate.breached": ",".join(verdict.breached) or "-",
                    "driftgate.contract": str(verdict.contract_passed),
                },
                artifacts=artifacts,
            )
            # Named after the monitors too: two deployments judging the same window for
            # different monitors must not overwrite each other's evidence.
            report_dir = (
                config.home_dir
                / "reports"
                / "drift"
                / f"{start:%Y%m%dT%H%M}-{end:%Y%m%dT%H%M}-{'-'.join(by_name)}"[:200]
            )
            report_dir.mkdir(parents=True, exist_ok=True)
            for path in folder.iterdir():
                (report_dir / path.name).write_bytes(path.read_bytes())
            (report_dir / "summary.md").write_text(verdict.markdown())
            verdict.report_dir = report_dir

        # The hysteresis state advances only once the evidence is logged: a run that
        # fails before this point leaves the window unjudged, so the next run judges it
        # again (catch-up) instead of remembering a breach no action was taken on.
        for result in results:
            verdict.firings[result.monitor] = reviews.advance(
                model_name=name,
                model_version=version,
                monitor=by_name[result.monitor],
                result=result,
                window_start=start,
                window_end=end,
            )
        take_actions(config, verdict, by_name, reviews)
        (verdict.report_dir / "summary.md").write_text(verdict.markdown())
    finally:
        reviews.close()
    return verdict


def take_actions(
    config: ProjectConfig, verdict: WindowVerdict, monitors: dict[str, Monitor], reviews
) -> None:
    """The configured action of every monitor that fires on this window.

    ``pause_inference`` also opens (or updates) a review: a paused model needs a person,
    and the 503 body names the review to look at.
    """
    evidence = [f"runs:/{verdict.run_id}", str(verdict.report_dir / "summary.md")]
    webhook = config.monitoring.webhook_url or os.environ.get(WEBHOOK_ENV)
    for result in verdict.results:
        firing = verdict.firings.get(result.monitor)
        if firing is None or not firing.fire:
            continue
        action = monitors[result.monitor].action
        what = (
            f"{result.monitor}: {result.metric} {result.observed:.4g} > {result.threshold:g} on "
            f"{', '.join(result.breached_features) or 'the window'} "
            f"({verdict.start.isoformat()}..{verdict.end.isoformat()})"
        )
        taken = None
        if action in ("open_review", "pause_inference"):
            taken = _open_review(config, verdict, result, reviews, evidence, what)
        if action == "pause_inference":
            taken = _pause(config, verdict, result, evidence, what, taken.review_id)
        if action == "notify":
            taken = ActionTaken(result.monitor, "notify", what)
        if webhook and taken.changed:
            failure = _post(webhook, verdict, result, action, taken.review_id, what, evidence)
            taken.detail += f"; {failure}" if failure else "; webhook posted"
        verdict.actions.append(taken)


def _open_review(config, verdict, result, reviews, evidence, what) -> ActionTaken:
    change = reviews.open_or_update(
        model_name=verdict.model_name,
        model_version=verdict.model_version,
        monitor=result.monitor,
        metric=result.metric,
        window_start=verdict.start,
        window_end=verdict.end,
        observed=result.observed,
        threshold=result.threshold,
        features=result.breached_features,
        evidence=evidence,
    )
    review = change.review
    changed = change.created or change.updated
    if changed:
        registry.tag_model_version(
            config.tracking,
            verdict.model_name,
            verdict.model_version,
            {f"driftgate.review.{result.monitor}": f"{review.id} open, {review.breaches} breaches"},
        )
    state = "opened" if change.created else "updated" if change.updated else "unchanged"
    return ActionTaken(
        result.monitor, "open_review", f"review {review.id} {state}: {what}", review.id, changed
    )


def _pause(config, verdict, result, evidence, what, review_id) -> ActionTaken:
    control = control_store(config)
    try:
        switch = control.pause(
            verdict.model_name,
            reason=what,
            actor=ACTOR,
            monitor=result.monitor,
            window_start=verdict.start,
            window_end=verdict.end,
            evidence=evidence,
            review_id=review_id,
        )
    finally:
        control.close()
    state = "paused" if switch.changed else "already paused"
    return ActionTaken(
        result.monitor,
        "pause_inference",
        f"inference {state} (review {review_id}): {what}",
        review_id,
        switch.changed,
    )


def _post(webhook, verdict, result, action, review_id, what, evidence) -> str | None:
    from driftgate.notify import post_json

    return post_json(
        webhook,
        {
            "text": f"driftgate: {verdict.model_name} v{verdict.model_version} {action}: {what}",
            "model": verdict.model_name,
            "version": verdict.model_version,
            "monitor": result.monitor,
            "action": action,
            "review_id": review_id,
            "observed": result.observed,
            "threshold": result.threshold,
            "window": [verdict.start.isoformat(), verdict.end.isoformat()],
            "evidence": evidence,
        },
    )


def plan_windows(
    gates: GateConfig,
    *,
    end=None,
    window: str | None = None,
    names: list[str] | None = None,
    last_judged: Mapping[str, pd.Timestamp] | None = None,
    max_catch_up: int = 0,
) -> list[tuple[pd.Timestamp, pd.Timestamp, list[Monitor]]]:
    """(start, end, monitors) per window, in time order per monitor.

    Each monitor gets the window ending at ``end`` (default now); monitors sharing a
    window length (and a last judged window) share windows. ``window`` overrides every
    monitor's length; ``names`` selects monitors (unknown: ConfigError).

    Catch-up: when ``last_judged`` (monitor -> end of its last judged window) shows
    whole windows missed since — a run that failed, a worker that was down — those
    windows come first, oldest first, at most ``max_catch_up`` of them (the newest).
    """
    from driftgate.core.yamlconfig import ConfigError
    from driftgate.stores.samples import utc_now

    end = to_utc(end or utc_now())
    monitors = gates.monitors
    if names:
        unknown = sorted(set(names) - {m.name for m in monitors})
        if unknown:
            known = ", ".join(m.name for m in monitors)
            raise ConfigError(f"unknown monitor(s) {', '.join(unknown)}; known: {known}")
        monitors = [m for m in monitors if m.name in names]
    groups: dict[tuple[pd.Timedelta, pd.Timestamp | None], list[Monitor]] = {}
    for monitor in monitors:
        last = (last_judged or {}).get(monitor.name)
        key = (parse_duration(window or monitor.window), to_utc(last) if last else None)
        groups.setdefault(key, []).append(monitor)
    planned = []
    for (length, last), group in groups.items():
        current_start = end - length
        missed = []
        if last is not None and max_catch_up > 0:
            start = last
            while start + length <= current_start:
                missed.append((start, start + length, group))
                start += length
            if len(missed) > max_catch_up:
                log.warning(
                    "%s: %d windows missed since %s; judging the last %d",
                    ", ".join(m.name for m in group),
                    len(missed),
                    last,
                    max_catch_up,
                )
                missed = missed[-max_catch_up:]
        planned += [*missed, (current_start, end, group)]
    return planned


def last_judged_ends(config: ProjectConfig, gates: GateConfig) -> dict[str, pd.Timestamp]:
    """Monitor -> end of the last window judged for the current champion (for catch-up)."""
    version = registry.alias_version(config.tracking, config.model.name, registry.CHAMPION_ALIAS)
    if version is None:
        return {}
    reviews = review_store(config)
    try:
        ends = {
            m.name: reviews.last_window_end(config.model.name, version, m.name)
            for m in gates.monitors
        }
    finally:
        reviews.close()
    return {name: pd.Timestamp(end) for name, end in ends.items() if end is not None}


def plan_recent(
    config: ProjectConfig,
    gates: GateConfig,
    *,
    end=None,
    window: str | None = None,
    monitor_names: list[str] | None = None,
) -> list[tuple[pd.Timestamp, pd.Timestamp, list[Monitor]]]:
    """The windows a drift-check run judges: the current one for each monitor, after any
    missed since the last run (``monitoring.max_catch_up_windows``)."""
    catch_up = config.monitoring.max_catch_up_windows
    return plan_windows(
        gates,
        end=end,
        window=window,
        names=monitor_names,
        last_judged=last_judged_ends(config, gates) if catch_up else None,
        max_catch_up=catch_up,
    )


def judge_recent(
    config: ProjectConfig,
    gates: GateConfig,
    *,
    end=None,
    window: str | None = None,
    monitor_names: list[str] | None = None,
    source: str | None = None,
) -> list[WindowVerdict]:
    """Judge every planned window (see :func:`plan_windows`) without Prefect."""
    return [
        judge_window(config, gates, start, stop, monitors=group, source=source)
        for start, stop, group in plan_recent(
            config, gates, end=end, window=window, monitor_names=monitor_names
        )
    ]
