"""The drift-check job on real stores (SQLite) and a real MLflow store.

Windows are written straight into the sample store here; the service's own path into
the store is tested in tests/serving, and the whole loop over HTTP in tests/flows.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from driftgate import registry
from driftgate.gates.config import load_gate_config
from driftgate.jobs import drift_check as job
from driftgate.jobs.window_record import record
from driftgate.jobs.window_types import WindowVerdict
from driftgate.monitors.stattests import get_stattest
from driftgate.stores.control import ControlStore
from driftgate.stores.factories import monitor_state_store
from driftgate.stores.samples import Sample, SqlSampleStore
from tests.conftest import StepRecorder, mlflow_client

CALM = ("2030-01-01", "2030-01-02")
DRIFT_1 = ("2030-01-02", "2030-01-03")
DRIFT_2 = ("2030-01-03", "2030-01-04")
MISSING = ("2030-01-04", "2030-01-05")
DRIFT_3 = ("2032-01-01", "2032-01-02")  # after every window judged before it
STEPS = ("2031-06-01", "2031-06-02")  # the steps one by one; before DRIFT_3


def write_window(store, frame, features, window, version, missing=None, share=0.0):
    start = pd.Timestamp(window[0], tz="UTC")
    step = pd.Timedelta(days=1) / len(frame)
    samples = []
    for i, (_, row) in enumerate(frame.iterrows()):
        values = {f: float(row[f]) for f in features}
        if missing and i < int(len(frame) * share):
            values[missing] = None
        samples.append(
            Sample(
                timestamp=start + i * step,
                request_id=f"{window[0]}-{i}",
                record_index=0,
                model_name="rainfall-classifier",
                model_version=version,
                features=values,
                prediction=0.5,
                predicted_class=1,
            )
        )
    store.append(samples)


@pytest.fixture(scope="module")
def monitored(trained_model, tmp_path_factory):
    folder = tmp_path_factory.mktemp("monitoring")
    config = trained_model.config.model_copy(deep=True)
    config.serving = config.serving.model_copy(
        update={
            "sample_store_url": f"sqlite:///{folder / 'samples.db'}",
            "control_store_url": f"sqlite:///{folder / 'control.db'}",
        }
    )
    config.home = str(folder / "home")
    # The report is this module's subject too (the session's project turns it off).
    config.monitoring = config.monitoring.model_copy(update={"evidently_report": True})
    version = trained_model.outcome.registered.version
    mlflow_client(config.tracking.uri).set_registered_model_alias(
        config.model.name, registry.CHAMPION_ALIAS, version
    )
    data, features = trained_model.data, trained_model.data.features
    rng = np.random.default_rng(7)
    # In-distribution: a bootstrap of the training rows, without the two corrupt
    # sea-level pressure readings (94 std) that the contract tolerates at 0.1% only.
    pool = data.splits.train[data.splits.train["sea_level_pressure"].abs() < 10]
    calm = pool.iloc[rng.integers(0, len(pool), 800)]
    late = data.splits.production[data.splits.production["date"].dt.year >= 1990]
    store = SqlSampleStore(config.serving.sample_store(config.home_dir))
    write_window(store, calm, features, CALM, version)
    write_window(store, late.iloc[:800], features, DRIFT_1, version)
    write_window(store, late.iloc[800:1600], features, DRIFT_2, version)
    write_window(store, calm, features, MISSING, version, missing="dew_point", share=0.10)
    write_window(store, late.iloc[1600:2400], features, DRIFT_3, version)
    write_window(store, late.iloc[:800], features, STEPS, version)
    store.close()
    return {
        "config": config,
        "gates": load_gate_config(),
        "version": version,
        "data": data,
        "features": features,
    }


def judge(monitored, window):
    return job.judge_window(monitored["config"], monitored["gates"], *window)


def open_reviews(monitored):
    store = job.review_store(monitored["config"])
    try:
        return store.list(status="open")
    finally:
        store.close()


def paused(monitored):
    control = ControlStore(monitored["config"].serving.control_store(monitored["config"].home_dir))
    try:
        return control.state(monitored["config"].model.name)
    finally:
        control.close()


def test_in_distribution_window_raises_nothing(monitored):
    recorder = StepRecorder()  # the journey's steps, as the drift-check flow runs them
    verdict = job.judge_window(monitored["config"], monitored["gates"], *CALM, run_step=recorder)
    assert recorder.names == job.STEPS and recorder.result("act") is verdict
    assert verdict.rows == 800 and verdict.contract_passed
    assert verdict.breached == [] and verdict.actions == []
    assert all(r.status == "ok" for r in verdict.results)
    assert open_reviews(monitored) == [] and not paused(monitored).paused


def test_drifted_windows_open_exactly_one_review_and_rerun_changes_nothing(monitored):
    first = judge(monitored, DRIFT_1)
    assert first.breached == ["mean-shift-kl"]
    second = judge(monitored, DRIFT_2)
    again = judge(monitored, DRIFT_2)
    assert [a.action for a in first.actions] == ["open_review"]
    (review,) = open_reviews(monitored)
    assert review.monitor == "mean-shift-kl" and review.breaches == 2
    assert review.observed > 0.1 and review.features
    assert f"runs:/{second.run_id}" in review.evidence
    assert again.actions[0].changed is False
    assert not paused(monitored).paused
    tags = (
        mlflow_client(monitored["config"].tracking.uri)
        .get_model_version(monitored["config"].model.name, monitored["version"])
        .tags
    )
    assert tags["driftgate.review.mean-shift-kl"].startswith(review.id)


def test_missing_sensor_pauses_inference_with_the_review_and_evidence(monitored):
    verdict = judge(monitored, MISSING)
    missing = next(r for r in verdict.results if r.monitor == "missing-values")
    assert missing.breached and missing.breached_features == ["dew_point"]
    assert missing.observed == pytest.approx(0.10)
    state = paused(monitored)
    assert state.paused and state.monitor == "missing-values"
    assert "dew_point" in state.reason and state.review_id
    assert f"runs:/{verdict.run_id}" in state.evidence
    judge(monitored, MISSING)  # re-run: no second pause event
    control = ControlStore(monitored["config"].serving.control_store(monitored["config"].home_dir))
    events = control.events(monitored["config"].model.name)
    control.close()
    assert [e.action for e in events].count("pause") == 1


def test_a_rerun_of_a_judged_window_after_a_resume_does_not_pause_again(monitored):
    """Issue 18: the re-run took the window's actions again and paused a resumed model."""
    config = monitored["config"]
    control = job.control_store(config)
    control.resume(config.model.name, reason="sensor fixed", actor="test")
    control.close()
    again = judge(monitored, MISSING)
    assert [a.action for a in again.actions] == ["pause_inference"]
    assert again.actions[0].changed is False and "already taken" in again.actions[0].detail
    assert not paused(monitored).paused


def test_each_window_is_an_mlflow_run_with_metrics_and_evidence(monitored):
    verdict = judge(monitored, DRIFT_1)
    client = mlflow_client(monitored["config"].tracking.uri)
    run = client.get_run(verdict.run_id)
    assert run.data.tags["driftgate.model_version"] == monitored["version"]
    assert run.data.tags["driftgate.window_start"].startswith("2030-01-02")
    for test in job.EVIDENCE_TESTS:  # every one that applies to a numeric feature
        if get_stattest(test).accepts("numeric"):
            assert f"drift.visibility.{test}" in run.data.metrics
    artifacts = {a.path for a in client.list_artifacts(verdict.run_id)}
    assert {"drift", "monitors", "contract", "report"} <= artifacts
    report = client.list_artifacts(verdict.run_id, "report")[0]
    assert report.path.endswith("evidently.html") and report.file_size > 10_000
    summary = (verdict.report_dir / "summary.md").read_text()
    assert summary.count("mean-shift-kl") >= 1
    # Rendered by the last step, after the actions: beside the summary, which names it.
    assert verdict.evidently_report == verdict.report_dir / "evidently.html"
    assert verdict.evidently_report.stat().st_size > 10_000
    assert f"Evidently report: {verdict.evidently_report}" in summary
    assert verdict.to_summary()["evidently_report"] == str(verdict.evidently_report)


def test_an_empty_window_is_reported_as_no_data(monitored):
    verdict = judge(monitored, ("2031-01-01", "2031-01-02"))
    assert verdict.rows == 0 and verdict.breached == []
    assert {r.status for r in verdict.results} == {"no_data"}


def test_read_gives_the_champion_its_profile_and_the_window(monitored):
    window = job.read(monitored["config"], *CALM)
    assert window.model_version == monitored["version"] and window.rows == 800
    assert list(window.current.columns) == list(window.profile.features)
    assert window.start == pd.Timestamp(CALM[0], tz="UTC")


def test_validate_checks_the_window_and_refuses_monitors_naming_unknown_features(monitored):
    """Issue 18: ``features: [no_such_feature]`` was a status ``error`` with exit 0."""
    from driftgate.core.yamlconfig import ConfigError

    config, monitors = monitored["config"], monitored["gates"].monitors
    window = job.read(config, *CALM)
    assert job.validate(config, window, monitors).passed
    typo = monitors[0].model_copy(update={"features": ["temperature", "no_such_feature"]})
    with pytest.raises(ConfigError, match=r"monitor 'mean-shift-kl': features.*no_such_feature"):
        job.validate(config, window, [typo])


def test_the_window_contract_is_judged_without_gx_unless_configured(monitored):
    """Issue 32: the numeric window's verdict by the columnar engine equals GX's."""
    config = monitored["config"]
    window = job.read(config, *CALM)
    columnar = job.validate(config, window, monitored["gates"].monitors)
    gx_config = config.model_copy(
        update={
            "monitoring": config.monitoring.model_copy(
                update={"contract_engine": "great_expectations"}
            )
        }
    )
    gx = job.validate(gx_config, window, monitored["gates"].monitors)
    assert (columnar.engine, gx.engine) == ("columnar", "great_expectations")
    mine, theirs = columnar.to_dict(), gx.to_dict()
    for result in (mine, theirs):
        del result["seconds"], result["engine"]
    assert mine == theirs


def test_summarise_and_decide_judge_a_window_without_touching_any_store(monitored):
    config, monitors = monitored["config"], monitored["gates"].monitors
    window = job.read(config, *STEPS)
    counts = job.summarise(config, window)
    decision = job.decide(config, window, counts, None, monitors)
    assert [r.monitor for r in decision.results] == [m.name for m in monitors]
    assert [r.monitor for r in decision.results if r.breached] == ["mean-shift-kl"]
    numeric = {t for t in job.EVIDENCE_TESTS if get_stattest(t).accepts("numeric")}
    assert {r.test for r in decision.evidence.results} == numeric  # the data has no categorical
    runs = mlflow_client(config.tracking.uri).search_runs(
        [
            mlflow_client(config.tracking.uri)
            .get_experiment_by_name(config.monitoring.experiment)
            .experiment_id
        ],
        filter_string="tags.`driftgate.window_start` = '2031-06-01T00:00:00+00:00'",
    )
    assert runs == []


def test_record_logs_and_counts_before_act_takes_the_actions(monitored):
    config, monitors = monitored["config"], monitored["gates"].monitors
    window = job.read(config, *STEPS)
    contract = job.validate(config, window, monitors)
    decision = job.decide(config, window, job.summarise(config, window), contract, monitors)

    def kl_breaches():
        (review,) = [r for r in open_reviews(monitored) if r.monitor == "mean-shift-kl"]
        return review.breaches

    breaches_before = kl_breaches()
    verdict = record(config, window, decision, contract, monitors)
    assert verdict.run_id and (verdict.report_dir / "drift.json").is_file()
    assert verdict.firings["mean-shift-kl"].fire and verdict.actions == []
    assert kl_breaches() == breaches_before  # recorded, not acted on
    acted = job.act(config, verdict, monitors)
    assert [a.action for a in acted.actions] == ["open_review"] and acted.actions[0].changed
    assert kl_breaches() == breaches_before + 1
    assert "Actions:" in (verdict.report_dir / "summary.md").read_text()


def test_a_review_update_is_posted_to_the_webhook(monitored):
    import json
    import threading
    from http.server import BaseHTTPRequestHandler, HTTPServer

    received = []

    class Receiver(BaseHTTPRequestHandler):
        def do_POST(self):
            received.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
            self.send_response(200)
            self.end_headers()

        def log_message(self, *args):
            pass

    server = HTTPServer(("127.0.0.1", 0), Receiver)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        config = monitored["config"].model_copy(deep=True)
        config.monitoring = config.monitoring.model_copy(
            update={"webhook_url": f"http://127.0.0.1:{server.server_port}/hook?token=secret"}
        )
        verdict = job.judge_window(config, monitored["gates"], *DRIFT_3)
    finally:
        server.shutdown()
        server.server_close()
    (post,) = received
    assert post["monitor"] == "mean-shift-kl" and post["action"] == "open_review"
    assert post["review_id"].startswith("rv-") and post["text"].startswith("driftgate:")
    assert f"runs:/{verdict.run_id}" in post["evidence"]
    assert "webhook posted" in verdict.actions[0].detail
    assert "secret" not in verdict.actions[0].detail


# -- issue 15: no silent pauses or no-ops ---------------------------------------------
def test_a_file_whose_columns_differ_from_the_model_is_an_error_naming_them(monitored, tmp_path):
    """Issue 15: every feature counted as 100% missing paused production."""
    from driftgate.core.errors import EXIT_USAGE
    from driftgate.monitors import MissingColumnError

    features = monitored["features"]
    frame = pd.DataFrame({f"{f}_renamed": [0.0, 1.0] for f in features})
    frame["timestamp"] = pd.to_datetime(["2035-01-01T00:10", "2035-01-01T00:20"], utc=True)
    path = tmp_path / "renamed.csv"
    frame.to_csv(path, index=False)
    with pytest.raises(MissingColumnError) as caught:
        job.judge_window(
            monitored["config"], monitored["gates"], "2035-01-01", "2035-01-02", source=str(path)
        )
    assert caught.value.exit_code == EXIT_USAGE
    assert all(f in str(caught.value) for f in features)


def test_a_single_request_is_insufficient_data_and_opens_no_review(monitored):
    """Issue 15: one test request gave KL 6.1 on every feature and opened a review."""
    config = monitored["config"]
    store = SqlSampleStore(config.serving.sample_store(config.home_dir))
    one = monitored["data"].splits.production.iloc[:1]
    window = ("2036-01-01", "2036-01-02")
    write_window(store, one, monitored["features"], window, monitored["version"])
    store.close()
    reviews_before = len(open_reviews(monitored))
    verdict = judge(monitored, window)
    assert verdict.rows == 1 and verdict.breached == [] and verdict.actions == []
    kl = next(r for r in verdict.results if r.monitor == "mean-shift-kl")
    assert kl.status == "insufficient_data" and "not significant" in kl.reason
    assert len(open_reviews(monitored)) == reviews_before
    run = mlflow_client(config.tracking.uri).get_run(verdict.run_id)
    assert run.data.metrics["monitor.mean-shift-kl.insufficient_data"] == 1.0
    assert "mean-shift-kl" in run.data.tags["driftgate.insufficient_data"]
    assert "insufficient_data" in verdict.markdown()
    # ... and on the service's /metrics, through the monitors' latest verdicts.
    state = monitor_state_store(config)
    try:
        latest = {row["monitor"]: row for row in state.latest_statuses(config.model.name)}
    finally:
        state.close()
    assert latest["mean-shift-kl"]["status"] == "insufficient_data"
    assert latest["mean-shift-kl"]["window_end"].startswith("2036-01-02")


def test_an_older_window_that_breaches_says_why_it_does_not_fire(monitored):
    """Issue 15: after a check at "now", older windows printed fired False, no reason."""
    verdict = judge(monitored, DRIFT_1)  # older than windows judged already
    kl = next(r for r in verdict.summary_rows() if r["monitor"] == "mean-shift-kl")
    assert kl["breached"] and not kl["fired"]
    assert "state ahead of this window" in kl["why"]
    assert "state ahead" in verdict.markdown()


def test_monitors_plan_reads_the_champion_and_warns_at_low_traffic(monitored):
    from driftgate.core.yamlconfig import ConfigError
    from driftgate.jobs import monitor_plan

    config, gates = monitored["config"], monitored["gates"]
    plans = monitor_plan.plan_monitors(config, gates, rows_per_window=30)
    assert [p.monitor for p in plans] == [m.name for m in gates.monitors]
    assert all(p.warnings for p in plans)
    assert "too few for kl 0.1" in monitor_plan.describe(plans, 12)
    with pytest.raises(ConfigError, match="--rows-per-window"):
        monitor_plan.plan_monitors(config, gates)  # no sample in the last day
    (line,) = monitor_plan.deploy_warnings(config, gates)
    assert line.startswith("monitors plan skipped")
    # A day of traffic is counted in the store (a day at production traffic is far
    # too many rows to read): 48 samples in the last 24 hours.
    store = SqlSampleStore(config.serving.sample_store(config.home_dir))
    start = pd.Timestamp.now(tz="UTC") - pd.Timedelta(days=1) + pd.Timedelta(minutes=1)
    day = (start.isoformat(), (start + pd.Timedelta(days=1)).isoformat())
    one_day = monitored["data"].splits.production.iloc[:48]
    write_window(store, one_day, monitored["features"], day, monitored["version"])
    store.close()
    observed = monitor_plan.observed_rows_per_window(config, gates)
    assert observed == {
        m.name: max(round(48 / 86400 * m.length.total_seconds()), 1) for m in gates.monitors
    }
    planned = monitor_plan.plan_monitors(config, gates)
    assert [p.rows_per_window for p in planned] == [observed[m.name] for m in gates.monitors]


def test_a_window_already_acted_on_says_so_and_the_report_shows_corrected_and_floor():
    """Issue 15 item 4: a re-run of a window acted on changes nothing and says why; the
    table carries the bias-corrected value and the effect-size floor."""
    from driftgate.monitors.actions import ActionTaken
    from driftgate.monitors.hysteresis import Firing
    from driftgate.monitors.rules import MonitorResult

    ks = MonitorResult(
        monitor="shape-ks", metric="ks", action="open_review", threshold=0.05, breached=True,
        observed=1e-9, p_value=1e-9, level=1e-5, bias_corrected=0.21, min_detectable=0.07,
        effect_size_floor=0.05,
    )  # fmt: skip
    verdict = WindowVerdict(
        model_name="m", model_version="1", start=pd.Timestamp("2030-01-01", tz="UTC"),
        end=pd.Timestamp("2030-01-02", tz="UTC"), rows=500, contract_passed=True,
        results=[ks], firings={"shape-ks": Firing(1, True)},
        actions=[ActionTaken("shape-ks", "open_review", "review r-1 updated", "r-1", False)],
    )  # fmt: skip
    (row,) = verdict.summary_rows()
    assert row["why"] == "already acted on this window: review r-1 updated"
    assert (row["corrected"], row["floor"], row["detectable"]) == ("0.21", "0.05", "0.07")
    header = verdict.markdown().splitlines()[4]
    assert "| corrected |" in header and "| floor |" in header


def test_the_report_rendered_apart_reads_the_same_window_and_version(monitored, tmp_path):
    """What `driftgate drift-check` runs in the background after the verdict."""
    config = monitored["config"]
    path = job.render_window_report(
        config, *CALM, version=monitored["version"], into=tmp_path, run_id=None
    )
    assert path == tmp_path / "evidently.html" and path.stat().st_size > 10_000
    assert "visibility" in path.read_text()  # a report of the window's features
    # A window with no samples renders nothing and says so (a warning, no exception).
    assert (
        job.render_window_report(
            config, "2000-01-01", "2000-01-02", version=monitored["version"], into=tmp_path / "x"
        )
        is None
    )
