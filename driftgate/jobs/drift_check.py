"""The drift-check job: judge one window of production samples and act on it.

:func:`judge_window` is a pipeline over seven named steps, each a plain function (and, in
``flows/drift_check.py``, one Prefect task each, so the Prefect UI shows them):

1. :func:`read` the champion's reference profile and the window's samples (sample store,
   or Parquet/CSV files with a timestamp column); a window larger than
   ``monitoring.contract_rows`` is not loaded: its chunks stream from the store into
   the summary, and a lease keeps retention off it until the check ends;
2. :func:`validate` the monitors against the model and its contract (a typo is a
   ConfigError here, not a silent pass), then the window against the data contract;
3. :func:`summarise` the window into per-feature counts once (in process, or on Dask);
4. :func:`decide` every drift statistic for the evidence, and each monitor with its own
   threshold (:mod:`monitors.rules`);
5. ``record`` the evidence (an MLflow run with one metric per feature and test, the
   contract result and the drift report; report files under home) and then the
   hysteresis state (consecutive breaches): :mod:`driftgate.jobs.window_record`;
6. :func:`act` on the monitors that fire: the registered actions
   (:mod:`monitors.actions`), each once per monitor and window, and the webhook;
7. ``report``: the Evidently HTML report for people, added to the run last, so that
   no decision or action waits for it: :mod:`driftgate.jobs.window_report`.

This module is the journey (:func:`judge_window`, the steps in order) and the steps
that read, validate, summarise, decide and act; what the steps hand each other
(:class:`WindowSamples`, :class:`Decision`, :class:`WindowVerdict`) is
:mod:`driftgate.jobs.window_types`, and which windows a run judges is
:mod:`driftgate.jobs.window_plan`.

The MLflow run is logged before any state changes or action, so that every action
links to its evidence; if anything before that fails, nothing is recorded and no
action is taken on partial results, and the next run judges the window again
(catch-up: :func:`plan_recent`).
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import math
import os
from collections.abc import Mapping
from pathlib import Path

import pandas as pd

from driftgate import registry
from driftgate.config import ProjectConfig
from driftgate.gates.config import GateConfig
from driftgate.jobs.contract_revision import REFUSED_METRIC, proposal_evidence
from driftgate.jobs.retrain import Launcher, start_retrain
from driftgate.jobs.steps import StepRunner, call_step
from driftgate.jobs.window_plan import plan_recent
from driftgate.jobs.window_record import record
from driftgate.jobs.window_report import EVIDENTLY_REPORT, render_report, report
from driftgate.jobs.window_types import (
    Decision,
    WindowSamples,
    WindowVerdict,
    features_frame,
    stream_features,
)
from driftgate.monitors.actions import ActionPorts, ActionRequest, ActionTaken, take_action
from driftgate.monitors.durations import parse_duration
from driftgate.monitors.hysteresis import Firing
from driftgate.monitors.partitions import Mapper
from driftgate.monitors.rules import Monitor, MonitorResult, check_monitors_against
from driftgate.stores.control import fit_cause
from driftgate.stores.factories import (
    control_store,
    label_store,
    monitor_state_store,
    open_reader,
    review_store,
)
from driftgate.stores.samples import to_utc

log = logging.getLogger(__name__)

WEBHOOK_ENV = "DRIFTGATE_WEBHOOK_URL"
ACTOR = "drift-check"


def __getattr__(name: str):
    # ``EVIDENCE_TESTS`` was a hard-coded tuple; it is the statistics registered with
    # ``evidence`` now, read when asked so that a plugin loaded after import counts.
    if name == "EVIDENCE_TESTS":
        from driftgate.monitors.stattests import evidence_tests

        return tuple(evidence_tests())
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# Importable from here as before; they live in driftgate.stores.factories and
# driftgate.monitors.rules / driftgate.monitors.actions now.
__all__ = [
    "ActionTaken",
    "act",
    "control_store",
    "decide",
    "judge_window",
    "open_reader",
    "parse_duration",
    "read",
    "review_store",
    "summarise",
    "validate",
]


def load_champion_profile(config: ProjectConfig, version: str):
    """The reference profile of ``version``, cached under home (profiles are immutable),
    its binned nulls kept beside it (``nulls/``: a fresh process reads them instead of
    building them again, :func:`monitors.nulls.keep_nulls_in`)."""
    from driftgate.monitors.nulls import keep_nulls_in
    from driftgate.monitors.profile import ReferenceProfile

    cache = config.home_dir / "profiles" / f"{config.model.name}-v{version}"
    folder = cache / registry.REFERENCE_PROFILE_ARTIFACT
    if not (folder / "profile.json").is_file():
        cache.mkdir(parents=True, exist_ok=True)
        folder = registry.download_reference_profile(
            config.tracking, config.model.name, version, cache
        )
    profile = ReferenceProfile.load(folder)
    keep_nulls_in(profile, cache / "nulls")
    return profile


# -- 1. read -------------------------------------------------------------------------
def read(config: ProjectConfig, start, end, *, source: str | None = None) -> WindowSamples:
    """The champion's version and reference profile, and the samples of ``[start, end)``.

    From the sample store, a window of more than ``monitoring.contract_rows`` samples is
    not loaded: the result streams it (see :class:`WindowSamples`). The store leases
    the window so that retention never cuts it while it is judged
    (:meth:`WindowSamples.close` ends the lease; :func:`judge_window` calls it).
    """
    start, end = to_utc(start), to_utc(end)
    name = config.model.name
    version = registry.alias_version(config.tracking, name, registry.CHAMPION_ALIAS)
    if version is None:
        raise registry.RegistryError(f"model '{name}' has no champion to monitor")
    profile = load_champion_profile(config, version)
    schema = dict(profile.schema)
    reader = open_reader(config, source)
    window = WindowSamples(
        model_name=name,
        model_version=version,
        start=start,
        end=end,
        profile=profile,
        samples=pd.DataFrame(),
        current=pd.DataFrame(),
    )
    if not hasattr(reader, "iter_window"):  # files: read whole, as given
        window.samples = reader.read_window(start, end)
        window.current = features_frame(window.samples, schema)
        return window
    window.store_url = reader.url
    window.sqlite_synchronous = config.serving.sqlite_synchronous
    window.use_store(reader)  # every later read of the window goes through it
    window.chunk_rows = config.monitoring.partition_rows
    try:
        window.lease_id = reader.lease(start, end)
        stats = reader.window_stats(start, end)
        window.row_count = stats.rows
        window.estimated_records = stats.estimated_records
        window.sample_fraction = stats.min_fraction
        window.samples = _held_samples(config, reader, start, end, stats.rows)
        window.stream = stats.rows > config.monitoring.contract_rows
        window.current = features_frame(window.samples, schema)
        window.traffic = _traffic(reader, start, end, stats.rows)
    except BaseException:
        window.close()
        raise
    return window


def _held_samples(config: ProjectConfig, reader, start, end, rows: int) -> pd.DataFrame:
    """The window's samples held in memory: all of them, or an even sample of
    ``monitoring.contract_rows`` of a larger window (whose rows then stream)."""
    cap = config.monitoring.contract_rows
    if rows <= cap:
        return reader.read_window(start, end)
    return reader.read_window(start, end, every=math.ceil(rows / cap))


def _traffic(reader, start, end, accepted: int):
    """The window's traffic counts (rejected records, overflow, requests log)."""
    from driftgate.monitors.traffic import TrafficCounts

    rejected = reader.rejected_stats(start, end)
    requests = reader.request_stats(start, end)
    return TrafficCounts(
        accepted=accepted,
        rejected=rejected.rows,
        overflow=rejected.overflow,
        by_kind=rejected.by_kind,
        by_field=rejected.by_field,
        by_field_kind=rejected.by_field_kind,
        requests=requests.count,
        errors=requests.errors,
        latencies=requests.latencies,
    )


# -- 2. validate ---------------------------------------------------------------------
def validate(config: ProjectConfig, window: WindowSamples, monitors: list[Monitor]):
    """Check the monitors against the champion's features and the project's contract
    (ConfigError naming the monitor), then the window against the contract.

    Returns the contract result (``data_contracts.ContractResult``), or None when the
    project has no contract.
    """
    from driftgate.data_contracts import Contract, validate_batch

    contract = Contract.load(config.data.contract) if config.data.contract is not None else None
    where = f"{Path(config.gates).name if config.gates else 'gates.yaml'}: "
    # The champion's task too: performance_estimate:rmse on a classifier was `error`
    # on every window, exit 0 (issue 30).
    outputs = getattr(window.profile, "outputs", None)
    task = (
        outputs.task
        if outputs is not None
        else registry.version_outputs(config.tracking, window.model_name, window.model_version)[0]
    )
    check_monitors_against(monitors, window.profile.features, contract, where=where, task=task)
    if contract is None:
        return None
    present = [c for c in contract.columns if c in window.samples.columns]
    # engine "auto" (the default): a window of plain numbers is judged by the columnar
    # equivalent of the GX suite (the same results, tests/data_contracts/test_columnar.py),
    # not by importing GX (1.2 s of a 30-row check in a fresh process, issue 32); the
    # result names its engine. Any other window, and `contract validate`, use GX.
    return validate_batch(
        contract,
        window.samples[present],
        row_count=window.rows,
        engine=config.monitoring.contract_engine,
    )


# -- 3. summarise --------------------------------------------------------------------
def summarise(config: ProjectConfig, window: WindowSamples, mapper: Mapper | None = None):
    """The window's per-feature counts, summarised once; every statistic runs on them.

    ``mapper`` summarises the window's cells (row slices x feature groups, sized by
    ``monitoring.partition_rows`` and ``feature_groups``): in this process by default;
    the drift-check flow passes one that runs them on a Dask cluster. Either way the
    statistics are the same, bit for bit (:mod:`monitors.partitions`).
    """
    from driftgate.monitors.partitions import (
        feature_groups,
        row_slices,
        summarise_in_process,
        summarise_parts,
        summarise_stream,
    )

    groups = feature_groups(list(window.profile.features), config.monitoring.feature_groups)
    mapper = mapper or summarise_in_process
    if window.stream:  # streamed from the store: the chunks are the slices
        return summarise_stream(window.profile, window.chunks(), groups, mapper=mapper)
    return summarise_parts(
        window.profile,
        row_slices(window.current, config.monitoring.partition_rows),
        groups,
        mapper=mapper,
    )


# -- 4. decide -----------------------------------------------------------------------
def decide(
    config: ProjectConfig, window: WindowSamples, counts, contract_result, monitors: list[Monitor]
) -> Decision:
    """Every evidence statistic, and each monitor's result, in the monitors' order.

    Monitors on the same statistic with different decisions get one check each
    (:func:`monitors.rules.group_by_threshold`). Each drift monitor is decided at its
    per-feature level (its false-alarm budget, :mod:`monitors.budget`) and the window's
    size (:mod:`monitors.nulls`); a window too small for any outcome to be significant is
    ``insufficient_data``, never a pass, never a breach. ``monitoring.min_rows`` (unset by
    default) adds a floor of its own.
    """
    from driftgate.monitors import check_drift_counts
    from driftgate.monitors.kinds import WindowEvidence, evaluate_all
    from driftgate.monitors.stattests import evidence_tests

    profile = window.profile
    # Every statistic that says it is evidence (StatTest.evidence), logged per feature
    # for people and the MLflow compare view; decisions come from the monitors' kinds.
    evidence = check_drift_counts(profile, counts, tests=evidence_tests())
    window_evidence = WindowEvidence(
        profile=profile,
        counts=counts,
        # population: all judges drift on every received record, the refused ones too.
        with_rejected=lambda: _with_rejected(window, counts),
        contract_result=contract_result,
        # A streamed window holds an even sample of its rows: output monitors judge it.
        samples=window.samples,
        traffic=window.traffic,
        labelled=None if window.store_url is None else lambda: _labelled_outputs(config, window),
        labels_missing_reason="labels live in the sample store; a --source file has none",
        baseline=lambda metric: registry.version_test_metric(
            config.tracking, window.model_name, window.model_version, metric
        ),
        decision_threshold=config.serving.decision_threshold,
        pooled=None if window.store_url is None else pooled_windows(window, counts),
    )
    results = evaluate_all(monitors, window_evidence)
    results = concentration_checked(config, window, results, monitors)
    min_rows = config.monitoring.min_rows
    if min_rows is not None and window.rows < min_rows:
        results = [
            MonitorResult(
                **{
                    **r.__dict__,
                    "breached": False,
                    "status": "insufficient_data",
                    "reason": f"{window.rows} rows < monitoring.min_rows ({min_rows})",
                }
            )
            for r in results
        ]
    return Decision(results=results, evidence=evidence)


# The action a breach concentrated in one client is downgraded from, and to.
PAUSE_ACTION, REVIEW_ACTION = "pause_inference", "open_review"


def concentration_suspects(results: list[MonitorResult]) -> list[MonitorResult]:
    """The breaches that would pause inference on a statistic whose breach is missing
    values counted per client (``StatTest.counts_per_client``: ``missing_share``)."""
    from driftgate.monitors.stattests import STATTESTS

    def counts_per_client(metric: str) -> bool:
        test = STATTESTS.get(metric)  # None: not a statistic (a performance metric ...)
        return test is not None and test.counts_per_client

    return [
        r for r in results
        if r.breached and r.action == PAUSE_ACTION and r.breached_features
        and counts_per_client(r.metric)
    ]  # fmt: skip


def concentration_checked(
    config: ProjectConfig, window: WindowSamples, results: list[MonitorResult], monitors
) -> list[MonitorResult]:
    """Pause only on a broad breach: a monitor on missing values counted per client
    (:func:`concentration_suspects`) whose action is ``pause_inference`` and that
    breaches is judged again on the window without the
    client that sent the most missing values in its breached features; if it does not
    breach without that client, its action becomes ``open_review`` and its result says
    whose values they were (``details["concentration"]``).

    Why: one client sending one null per request could pause inference for every
    client (issue 28, item 4). Rows stored without a client key count as one unknown
    client. A window with one client is everyone's traffic (a service behind a proxy
    without ``serving.client_id_header``): it pauses as before, as does a window read
    from files, which cannot tell clients apart.
    """
    from driftgate.monitors.kinds import WindowEvidence, evaluate_all
    from driftgate.monitors.partitions import summarise_stream

    by_name = {m.name: m for m in monitors}
    suspects = concentration_suspects(results)
    if not suspects or window.store_url is None:
        return results
    schema = dict(window.profile.schema)
    checked: dict[str, MonitorResult] = {}
    store = window.store()  # the window's: its reads share one store
    for result in suspects:
        features = list(result.breached_features)
        tallies = store.missing_by_client(window.start, window.end, features)
        if len(tallies) < 2:
            continue
        sent = {c: sum(t.missing.values()) for c, t in tallies.items()}
        top = max(sent, key=lambda c: (sent[c], c))
        if sent[top] == 0:
            continue
        rest = summarise_stream(
            window.profile,
            stream_features(store, window.start, window.end, schema, window.chunk_rows or 100_000,
                    window.lease_id, without_client=top),
        )  # fmt: skip
        evidence = WindowEvidence(
            profile=window.profile,
            counts=rest,
            with_rejected=lambda counts=rest: _with_rejected(window, counts),
        )
        [again] = evaluate_all([by_name[result.monitor]], evidence)
        if again.breached:
            continue  # broad: it holds without the client, so it pauses
        per_feature = ", ".join(
            f"{tallies[top].missing[f]} of {sum(t.missing[f] for t in tallies.values())} "
            f"missing values in {f}"
            for f in features
        )
        without = "not breached" if again.status == "ok" else again.status
        text = (
            f"client {top} sent {per_feature}; without its {tallies[top].rows} rows "
            f"{result.metric} is {without}: {PAUSE_ACTION} downgraded to {REVIEW_ACTION}"
        )
        log.warning("%s: %s", result.monitor, text)
        checked[result.monitor] = dataclasses.replace(
            result,
            action=REVIEW_ACTION,
            details={**result.details, "concentration": text, "concentrated_client": top},
        )
    return [checked.get(r.monitor, r) for r in results]


def _labelled_outputs(config: ProjectConfig, window: WindowSamples):
    """The window's labelled records of the champion's version and their stored outputs
    (the performance monitors' port: the label store and the registry are adapters)."""
    from driftgate.monitors.kinds import LabelledOutputs

    task, classes = registry.version_outputs(
        config.tracking, window.model_name, window.model_version
    )
    store = label_store(config, window.store_url)
    try:
        labelled = store.labelled_window(
            window.start, window.end, model_version=window.model_version
        )
    finally:
        store.close()
    column = "predicted_class" if task == "multiclass" else "prediction"
    return LabelledOutputs(
        task=task,
        classes=tuple(classes),
        y=labelled["value"].to_numpy(dtype=float),
        outputs=labelled[column].to_numpy(dtype=float),
    )


def pooled_windows(window: WindowSamples, counts):
    """The port of evidence across windows (:mod:`monitors.evidence`): ``k`` -> the
    counts of the last ``k`` windows of this window's length, this one included.

    Read again from the sample store at every check, never remembered: a restart or a
    catch-up run pools exactly what an uninterrupted run would (rows the retention has
    purged are gone from every run alike, and the report says how many rows the pool
    held). Each span is read once per check: scale 24 reads the 12 windows before
    scale 12's and merges them with its counts. Earlier windows pool only the rows the
    champion being judged scored: after a retrain promoted a model fitted on recent
    data, the old champion's windows would all look drifted from its new reference.
    """
    from driftgate.monitors.partitions import summarise_stream
    from driftgate.monitors.window import merge_windows

    length = window.end - window.start
    schema = dict(window.profile.schema)
    pools = {1: counts}

    def pooled(windows: int):
        if windows not in pools:
            shorter = max(k for k in pools if k < windows)
            earlier = summarise_stream(
                window.profile,
                stream_features(window.store(), window.end - windows * length,
                        window.end - shorter * length, schema,
                        window.chunk_rows or 100_000, None,
                        model_version=window.model_version),
            )  # fmt: skip
            # Earlier rows first: the merged sums are added in time order.
            pools[windows] = merge_windows(window.profile, [[earlier], [pools[shorter]]])
        return pools[windows]

    return pooled


def _with_rejected(window: WindowSamples, counts):
    """The window's counts with its rejected records added (``population: all``)."""
    from driftgate.monitors.partitions import summarise_stream
    from driftgate.monitors.window import merge_windows

    if not window.traffic or not window.traffic.rejected:
        return counts
    rejected = summarise_stream(window.profile, window.rejected_chunks())
    return merge_windows(window.profile, [[counts], [rejected]])


# -- 6. act --------------------------------------------------------------------------
def act(
    config: ProjectConfig,
    verdict: WindowVerdict,
    monitors: list[Monitor],
    launcher: Launcher | None = None,
) -> WindowVerdict:
    """Take the configured action of every monitor that fires on this window, once per
    monitor and window (:func:`monitors.actions.take_action`), and post the webhook for
    every action that changed something. ``launcher`` runs a ``retrain`` action's
    retrain (:mod:`driftgate.jobs.retrain`; default: in process)."""
    evidence = [f"runs:/{verdict.run_id}", str(verdict.report_dir / "summary.md")]
    webhook = config.monitoring.webhook_url or os.environ.get(WEBHOOK_ENV)
    by_name = {m.name: m for m in monitors}
    firing = [r for r in verdict.results if verdict.firings.get(r.monitor, Firing(0, False)).fire]
    if firing:
        reviews, state = review_store(config), monitor_state_store(config)
        ports = ActionPorts(
            reviews=reviews,
            pause=lambda model_name, **why: _pause(config, model_name, **why),
            tag_model_version=lambda model_name, version, tags: registry.tag_model_version(
                config.tracking, model_name, version, tags
            ),
            ledger=state,
            actor=ACTOR,
            retrain=lambda request, review_id: start_retrain(
                config, request, review_id, by_name[request.result.monitor].retrain, launcher
            ),
        )
        try:
            for result in firing:
                # The result's action: the monitor's, or open_review where a pause was
                # downgraded because the breach was one client's (concentration_checked).
                action = result.action
                concentration = result.details.get("concentration")
                request = ActionRequest(
                    model_name=verdict.model_name,
                    model_version=verdict.model_version,
                    start=verdict.start,
                    end=verdict.end,
                    result=result,
                    evidence=[*evidence, concentration] if concentration else evidence,
                )
                taken = take_action(action, request, ports)
                if result.metric == REFUSED_METRIC and taken.changed and taken.review_id:
                    proposed, said = _propose_revision(config, reviews, verdict, taken.review_id)
                    taken.detail += said
                    if proposed:
                        verdict.proposals.append(taken.review_id)
                if webhook and taken.changed:
                    failure = _post(webhook, request, action, taken.review_id)
                    taken.detail += f"; {failure}" if failure else "; webhook posted"
                verdict.actions.append(taken)
        finally:
            reviews.close()
            state.close()
    (verdict.report_dir / "summary.md").write_text(verdict.markdown())
    return verdict


def _propose_revision(config: ProjectConfig, reviews, verdict: WindowVerdict, review_id: str):
    """Add the contract revision the window's refused traffic asks for to the review's
    evidence (:mod:`driftgate.jobs.contract_revision`); whether one was added, and what
    to say on the action. A proposal that cannot be built leaves the review as the
    action left it."""
    try:
        lines = proposal_evidence(config, verdict.start, verdict.end, review_id)
        if lines:
            reviews.add_evidence(review_id, lines)
    except Exception as exc:  # the review is opened already: a proposal is a bonus
        log.warning("no contract revision proposed on review %s: %s", review_id, exc)
        return False, f"; no contract revision proposed ({exc})"
    if not lines:
        return False, "; no contract revision to propose"
    return True, (
        f"; contract revision proposed ({len(lines) - 1} changes: driftgate contract revise "
        f"--from-review {review_id})"
    )


def render_window_report(
    config: ProjectConfig,
    start,
    end,
    *,
    version: str,
    into: Path,
    run_id: str | None = None,
    source: str | None = None,
) -> Path | None:
    """The background half of the ``report`` step (:mod:`driftgate.jobs.window_report`):
    the window's report rendered into ``into`` from the samples :func:`read` holds and
    ``version``'s profile (None, and a warning, if it failed). Here, beside :func:`read`,
    since it reads the window as that step does. Reads only: no lease, no registry
    lookup (the version is given), so that it never holds a lock a later check or the
    service waits on."""
    start, end = to_utc(start), to_utc(end)
    profile = load_champion_profile(config, version)
    reader = open_reader(config, source)
    try:
        if hasattr(reader, "window_stats"):  # a store: at most contract_rows held
            rows = reader.window_stats(start, end).rows
            samples = _held_samples(config, reader, start, end, rows)
        else:
            samples = reader.read_window(start, end)
    finally:
        getattr(reader, "close", lambda: None)()
    window = WindowSamples(
        model_name=config.model.name,
        model_version=version,
        start=start,
        end=end,
        profile=profile,
        samples=samples,
        current=features_frame(samples, dict(profile.schema)),
    )
    if window.rows == 0:
        log.warning("Evidently report of %s..%s not rendered: no samples", start, end)
        return None
    path = Path(into) / EVIDENTLY_REPORT
    return path if render_report(config, window, path, run_id) else None


def _pause(config: ProjectConfig, model_name: str, **why):
    control = control_store(config)
    try:
        return control.pause(model_name, **fit_cause(**why))
    finally:
        control.close()


def _post(webhook: str, request: ActionRequest, action: str, review_id: str | None):
    from driftgate.notify import post_json

    result = request.result
    return post_json(
        webhook,
        {
            "text": (
                f"driftgate: {request.model_name} v{request.model_version} {action}: {request.what}"
            ),
            "model": request.model_name,
            "version": request.model_version,
            "monitor": result.monitor,
            "action": action,
            "review_id": review_id,
            "observed": result.observed,
            "threshold": result.threshold,
            "window": [request.start.isoformat(), request.end.isoformat()],
            "evidence": request.evidence,
        },
    )


# -- the pipeline --------------------------------------------------------------------
STEPS = (
    "read-window", "validate-window", "summarise-window", "decide", "record", "act", "report",
)  # fmt: skip


def judge_window(
    config: ProjectConfig,
    gates: GateConfig,
    start,
    end,
    *,
    monitors: list[Monitor] | None = None,
    source: str | None = None,
    mapper: Mapper | None = None,
    launcher: Launcher | None = None,
    run_step: StepRunner = call_step,
    report_in_background: Mapping[str, str] | None = None,
) -> WindowVerdict:
    """Judge ``[start, end)`` with ``monitors`` (default: all of the gate config) and act.

    The seven steps of :data:`STEPS`, in order, each through ``run_step`` (here, or a
    Prefect task of the drift-check flow: :mod:`driftgate.jobs.steps`). ``mapper``:
    where the window's cells are summarised (see :func:`summarise`); ``launcher``: where
    a ``retrain`` action's retrain runs (see :func:`act`); ``report_in_background``:
    the Evidently report in a child process (see :func:`~driftgate.jobs.window_report.report`).
    """
    monitors = list(gates.monitors if monitors is None else monitors)
    window = run_step("read-window", read, config, start, end, source=source)
    try:  # the lease on the window holds until the actions are taken
        contract_result = run_step("validate-window", validate, config, window, monitors)
        counts = run_step("summarise-window", summarise, config, window, mapper)
        decision = run_step("decide", decide, config, window, counts, contract_result, monitors)
        verdict = run_step("record", record, config, window, decision, contract_result, monitors)
        verdict = run_step("act", act, config, verdict, monitors, launcher)
        return run_step("report", report, config, window, verdict, report_in_background)
    finally:
        window.close()


def judge_recent(
    config: ProjectConfig,
    gates: GateConfig,
    *,
    end=None,
    window: str | None = None,
    monitor_names: list[str] | None = None,
    source: str | None = None,
    launcher: Launcher | None = None,
    report_in_background: Mapping[str, str] | None = None,
) -> list[WindowVerdict]:
    """Judge every window :func:`driftgate.jobs.window_plan.plan_recent` plans, without Prefect (a
    ``launcher`` may start a retrain on a Prefect server: :mod:`driftgate.jobs.retrain`;
    ``report_in_background``: see :func:`~driftgate.jobs.window_report.report`)."""
    judge = functools.partial(
        judge_window, config, gates, source=source, launcher=launcher,
        report_in_background=report_in_background,
    )  # fmt: skip
    return [
        judge(start, stop, monitors=group)
        for start, stop, group in plan_recent(
            config, gates, end=end, window=window, monitor_names=monitor_names
        )
    ]
