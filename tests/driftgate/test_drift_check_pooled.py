"""Evidence across windows in the drift check: the pooled windows are read again from
the (real, SQLite) sample store at every check, so a catch-up run or a restart judges a
window exactly as the on-time run did (issue 31)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from driftgate.jobs import drift_check as job
from driftgate.jobs.window_types import WindowSamples
from driftgate.monitors import ReferenceProfile
from driftgate.monitors.evidence import Evidence
from driftgate.monitors.kinds import WindowEvidence, evaluate_all
from driftgate.monitors.rules import Monitor
from driftgate.monitors.window import summarise_window
from driftgate.stores.samples import Sample, SqlSampleStore
from tests.driftgate.test_drift_check_job import MISSING, monitored  # noqa: F401

HOUR = pd.Timedelta(hours=1)
START = pd.Timestamp("2033-03-01", tz="UTC")
FEATURES = ["x0", "x1", "x2"]
RNG = np.random.default_rng(31)
PROFILE = ReferenceProfile.fit(
    pd.DataFrame({f: RNG.normal(size=10_000) for f in FEATURES}), sample_rows=0
)
MONITOR = Monitor(
    name="mean-shift-kl",
    metric="kl",
    threshold=0.1,
    schedule="0 * * * *",
    action="open_review",
    evidence={"scales": [1, 3, 12, 24]},
)


def hour_of_samples(hour: int, rows: int, shift: float, rng, version: str = "1") -> list[Sample]:
    start = START + hour * HOUR
    return [
        Sample(
            timestamp=start + i * HOUR / rows,
            request_id=f"{hour}-{i}",
            record_index=0,
            model_name="m",
            model_version=version,
            features={f: float(rng.normal() + (shift if f == "x0" else 0.0)) for f in FEATURES},
            prediction=0.5,
            predicted_class=1,
        )
        for i in range(rows)
    ]


@pytest.fixture
def store_url(tmp_path):
    return f"sqlite:///{tmp_path / 'samples.db'}"


def write_hours(
    url: str, hours: range, shift_from: int, rows: int = 60, seed: int = 3, version: str = "1"
):
    store = SqlSampleStore(url)
    rng = np.random.default_rng(seed)
    try:
        for hour in hours:
            shift = 0.8 if hour >= shift_from else 0.0
            store.append(hour_of_samples(hour, rows, shift, rng, version))
    finally:
        store.close()


def judge(url: str, hour: int):
    """The monitor on window ``hour`` as the drift check's decide step gathers it."""
    start, end = START + hour * HOUR, START + (hour + 1) * HOUR
    store = SqlSampleStore(url)
    window = WindowSamples(
        model_name="m", model_version="1", start=start, end=end, profile=PROFILE,
        samples=pd.DataFrame(), current=pd.DataFrame(), store_url=url,
    )  # fmt: skip
    window.use_store(store)
    try:
        current = store.read_window(start, end)
        counts = summarise_window(PROFILE, current[FEATURES].astype(float))
        evidence = WindowEvidence(
            profile=PROFILE, counts=counts, pooled=job.pooled_windows(window, counts)
        )
        [result] = evaluate_all([MONITOR], evidence)
        return result
    finally:
        window.close()


def test_the_pool_is_read_from_the_store_and_names_its_span(store_url):
    write_hours(store_url, range(36), shift_from=24)  # 0.8 std on x0 from hour 24
    result = judge(store_url, 35)
    scales = {s["windows"]: s for s in result.details["scales"]}
    assert [scales[k]["rows"] for k in (1, 3, 12, 24)] == [60, 180, 720, 1440]
    assert result.breached and result.breached_features == ["x0"]
    assert result.details["evidence"].startswith("over the last ")
    assert scales[12]["breached"]
    calm = judge(store_url, 23)  # the last window before the shift: nothing pooled breaches
    assert not calm.breached and not any(s["breached"] for s in calm.details["scales"])


def test_a_catch_up_run_judges_a_window_as_the_on_time_run_did(store_url):
    write_hours(store_url, range(36), shift_from=24)
    on_time = judge(store_url, 35)
    write_hours(store_url, range(36, 48), shift_from=0, seed=4)  # later hours arrive
    late = judge(store_url, 35)  # judged again after a restart: nothing was remembered
    assert late.details == on_time.details and late.breached == on_time.breached


def test_a_pool_reaching_before_the_first_stored_hour_holds_what_there_is(store_url):
    write_hours(store_url, range(5), shift_from=99)
    result = judge(store_url, 4)
    assert [s["rows"] for s in result.details["scales"]] == [60, 180, 300, 300]
    assert not result.breached


def test_the_pool_holds_only_what_the_judged_champion_scored(store_url):
    # Hours 0-11 served by version 0 (shifted from the new champion's reference, as a
    # retrain on recent data leaves them); hour 12 is the new champion's first.
    write_hours(store_url, range(12), shift_from=0, version="0")
    write_hours(store_url, range(12, 13), shift_from=99, seed=5)
    result = judge(store_url, 12)
    assert [s["rows"] for s in result.details["scales"]] == [60, 60, 60, 60]
    assert not result.breached


@pytest.mark.integration
def test_the_drift_check_reports_where_the_pooled_evidence_was_found(monitored):  # noqa: F811
    # MISSING is in-distribution for kl (calm rows, a tenth of dew point missing); the
    # two days before it are the drifted production years.
    pooled = MONITOR.model_copy(update={"window": "1d", "evidence": Evidence(scales=[1, 3])})
    verdict = job.judge_window(monitored["config"], monitored["gates"], *MISSING, monitors=[pooled])
    [result] = verdict.results
    assert result.breached and result.details["window_breached"] is False
    assert result.details["evidence"] == "over the last 3 windows, 2,400 rows"
    assert [s["rows"] for s in result.details["scales"]] == [800, 2400]
    assert "over the last 3 windows, 2,400 rows: kl breached on" in verdict.markdown()
    summary = verdict.to_summary()["monitors"]["mean-shift-kl"]
    assert summary["details"]["scales"][1]["breached"] is True
