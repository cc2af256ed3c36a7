"""The ``retrain`` action through Prefect (the test harness's server), a real MLflow
store and real stores: with the ``train/<model>`` deployment registered as ``driftgate
deploy`` does, a breach creates one run of it (not waited for); a second breach while
it is in flight creates none; the train flow run with the retrain's id (what a worker
runs) records the candidate, its gate report and the outcome on the retrain and review.
"""

from __future__ import annotations

import threading
import time

import pandas as pd
import pytest

from driftgate import registry
from driftgate.config import load_config
from driftgate.flows.deployments import register_deployments
from driftgate.flows.retrain import launch, train_deployment
from driftgate.flows.train import train_flow
from driftgate.gates.config import load_gate_config
from driftgate.jobs import train as train_job
from driftgate.jobs.deploy import plan_deployments
from driftgate.jobs.retrain import start_retrain
from driftgate.monitors.actions import ActionPorts, ActionRequest, take_action
from driftgate.monitors.rules import MonitorResult
from driftgate.stores.factories import (
    control_store,
    monitor_state_store,
    review_store,
)
from driftgate.stores.retrains import DONE, IN_FLIGHT
from tests.conftest import REPO_ROOT, mlflow_client, register_session_model, retrains
from tests.flows.prefect_runs import task_names

MODEL = "rainfall-retrain-flow"


def window(day: str) -> tuple[pd.Timestamp, pd.Timestamp]:
    start = pd.Timestamp(day, tz="UTC")
    return start, start + pd.Timedelta(days=1)


def open_project(trained_model, tmp_path, model: str, settings=None):
    tracking = trained_model.config.tracking
    config_file = tmp_path / "driftgate.yaml"
    config_file.write_text(
        f"home: {tmp_path / 'home'}\nmodel:\n  name: {model}\n"
        f"tracking:\n  uri: {tracking.uri}\n  artifact_location: {tracking.artifact_location}\n"
    )
    config = load_config(config_file)
    gates = load_gate_config(config.gates).model_copy(update={"monitors": []})
    plans = plan_deployments(config, gates, config_path=config_file)
    register_deployments(plans, work_pool="driftgate-retrain-test")
    reviews, control = review_store(config), control_store(config)
    state = monitor_state_store(config)
    ports = ActionPorts(
        reviews=reviews,
        pause=control.pause,
        # No version of the model exists before the retrain: the review's tag is not the
        # subject here (tests/driftgate/test_retrain_job.py tags real versions).
        tag_model_version=lambda name, version, tags: None,
        ledger=state,
        retrain=lambda request, review_id: start_retrain(
            config, request, review_id, settings, launch
        ),
    )
    return {
        "config": config,
        "file": config_file,
        "ports": ports,
        "stores": (reviews, control, state),
    }


@pytest.fixture
def project(trained_model, tmp_path):
    opened = open_project(trained_model, tmp_path, MODEL)
    yield opened
    for store in opened["stores"]:
        store.close()


def fire(project, day: str):
    start, end = window(day)
    request = ActionRequest(
        model_name=project["config"].model.name,
        model_version="0",
        start=start,
        end=end,
        result=MonitorResult(
            monitor="mean-shift-kl",
            metric="kl",
            action="retrain",
            threshold=0.1,
            breached=True,
            observed=0.5,
            breached_features=["visibility"],
        ),
        evidence=["runs:/drift-run"],
    )
    return take_action("retrain", request, project["ports"])


def train_runs(config):
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import DeploymentFilter, DeploymentFilterId

    with get_client(sync_client=True) as client:
        deployment = client.read_deployment_by_name(train_deployment(config))
        return client.read_flow_runs(
            deployment_filter=DeploymentFilter(id=DeploymentFilterId(any_=[deployment.id]))
        )


def test_a_breach_runs_the_train_deployment_once_and_the_flow_records_the_outcome(project):
    config = project["config"]
    first = fire(project, "2031-01-01")
    again = fire(project, "2031-01-01")  # the same breach: the ledger
    second = fire(project, "2031-01-02")  # a second breach while one is in flight
    (run,) = train_runs(config)
    (retrain,) = retrains(config)
    assert first.changed and f"Prefect flow run {run.id}" in first.detail
    assert retrain.status == IN_FLIGHT and retrain.flow_run_id == str(run.id)
    assert retrain.launcher == "prefect"
    assert run.parameters["retrain_id"] == retrain.id and run.parameters["promote"] is True
    assert run.parameters["config_path"] == str(project["file"])  # the deployment's default
    assert run.state.is_scheduled()  # not waited for: no worker here
    assert again.changed is False and "already taken" in again.detail
    assert f"no new retrain: retrain {retrain.id} in flight" in second.detail
    review = project["ports"].reviews.get(first.review_id)
    assert f"prefect:flow-run/{run.id}" in review.evidence and "runs:/drift-run" in review.evidence

    # What the worker runs for that flow run: the train flow with its parameters.
    summary = train_flow(**run.parameters)
    (retrain,) = retrains(config)
    assert retrain.status == DONE and retrain.candidate_version == summary["version"]
    assert retrain.run_id == summary["run_id"]
    assert retrain.promoted == summary["gate"]["promoted"]
    review = project["ports"].reviews.get(first.review_id)
    assert f"runs:/{summary['run_id']}" in review.evidence
    assert retrain.gate_report in review.evidence and retrain.outcome in review.evidence

    # The slot is free again: the next breach starts the next run.
    third = fire(project, "2031-01-03")
    assert third.changed and "started retrain" in third.detail
    assert len(train_runs(config)) == 2


def paused_runs():
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import (
        FlowRunFilter,
        FlowRunFilterState,
        FlowRunFilterStateType,
    )
    from prefect.client.schemas.objects import StateType

    paused = FlowRunFilterState(type=FlowRunFilterStateType(any_=[StateType.PAUSED]))
    with get_client(sync_client=True) as client:
        return client.read_flow_runs(flow_run_filter=FlowRunFilter(state=paused))


@pytest.mark.parametrize("approve", [True, False], ids=["approved", "rejected"])
def test_approval_required_waits_for_a_person_and_records_the_decision(
    trained_model, tmp_path, approve
):
    from prefect.flow_runs import resume_flow_run

    from driftgate.monitors.rules import RetrainSettings

    decision = "approved" if approve else "rejected"
    settings = RetrainSettings(approval="required", approval_timeout="1h")
    project = open_project(trained_model, tmp_path, f"{MODEL}-{decision}", settings)
    config = project["config"]
    try:
        taken = fire(project, "2031-02-01")
        (run,) = train_runs(config)
        # Whether a person approves is the retrain's own setting, not a run parameter.
        assert "approval_timeout_s" not in run.parameters
        # The worker's run, in a thread: it trains, gates, then waits for the person.
        outcome = {}
        worker = threading.Thread(
            target=lambda: outcome.update(state=train_flow(**run.parameters, return_state=True)),
            daemon=True,
        )
        worker.start()
        deadline = time.monotonic() + 900
        while not (waiting := paused_runs()) and time.monotonic() < deadline:
            assert worker.is_alive(), "the train flow ended without waiting for approval"
            time.sleep(0.5)
        (waiting,) = waiting
        (retrain,) = retrains(config)
        assert retrain.status == IN_FLIGHT  # it holds the slot while it waits
        reason = "holds on 1990s data"
        resume_flow_run(waiting.id, run_input={"approve": approve, "reason": reason, "by": "ana"})
        worker.join(timeout=300)
        summary = outcome["state"].result()
        assert summary["gate"]["decision"] == decision
        # The one retrain journey: the training steps as tasks, then the gate's subflow.
        flow_run_id = outcome["state"].state_details.flow_run_id
        assert task_names(flow_run_id) == (*train_job.STEPS, "validate-and-promote")
        assert summary["gate"]["passed"] and summary["gate"]["promoted"] is approve
        (retrain,) = retrains(config)
        assert retrain.status == DONE
        assert (retrain.decision, retrain.decided_by) == (decision, "ana")
        assert retrain.promoted is approve and f"{decision} by ana: {reason}" in retrain.outcome
        review = project["ports"].reviews.get(taken.review_id)
        candidate = summary["version"]
        assert f"candidate v{candidate} {decision} by ana: {reason}" in review.evidence
        tags = mlflow_client(config.tracking.uri).get_model_version(config.model.name, candidate)
        assert tags.tags["driftgate.retrain.decision"] == decision
        assert tags.tags["driftgate.retrain.decided_by"] == "ana"
        champion = registry.alias_version(config.tracking, config.model.name, "champion")
        assert champion == (candidate if approve else None)
    finally:
        for store in project["stores"]:
            store.close()


def test_the_drift_check_flow_retrains_in_a_train_subflow_without_a_train_deployment(
    trained_model, tmp_path
):
    """Prefect local mode (the harness): no ``train/<model>`` deployment, so the flow's
    launcher runs the ``train`` flow (then ``validate-and-promote``) as a subflow of the
    drift check: a flow run in the Prefect UI, linked from the retrain and its review.
    Its monitor says ``approval: required``: nothing waits inside a drift check for a
    person, so the candidate is left to one exactly as in process
    (``tests/driftgate/test_retrain_job.py``): one journey, one approval rule."""
    from driftgate.flows.drift_check import drift_check_flow
    from driftgate.stores.samples import SqlSampleStore
    from tests.driftgate.test_drift_check_job import DRIFT_1, write_window

    tracking = trained_model.config.tracking
    rules = (REPO_ROOT / "gates" / "gates.yaml").read_text()
    # The first open_review is mean-shift-kl's (the others are commented out).
    assert rules.index("action: open_review") < rules.index("name: missing-values")
    rules = rules.replace(
        "action: open_review",
        "action: retrain\n    retrain: {approval: required, approval_timeout: 1h}",
        1,
    )
    (tmp_path / "gates.yaml").write_text(rules)
    config_file = tmp_path / "driftgate.yaml"
    config_file.write_text(
        f"home: {tmp_path / 'home'}\nmodel:\n  name: {MODEL}-local\ngates: gates.yaml\n"
        f"tracking:\n  uri: {tracking.uri}\n  artifact_location: {tracking.artifact_location}\n"
    )
    config = load_config(config_file)
    # The champion is the session's model; the retrain's training is the one under test.
    champion = register_session_model(trained_model, config.model.name)
    client = mlflow_client(tracking.uri)
    data = trained_model.data
    late = data.splits.production[data.splits.production["date"].dt.year >= 1990]
    store = SqlSampleStore(config.serving.sample_store(config.home_dir))
    write_window(store, late.iloc[:800], data.features, DRIFT_1, champion)
    store.close()

    (summary,) = drift_check_flow(
        config_path=str(config_file), end=DRIFT_1[1], window="1d", monitor_names=["mean-shift-kl"]
    )
    (action,) = summary["actions"]
    (retrain,) = retrains(config)
    assert action["action"] == "retrain" and "started retrain" in action["detail"]
    assert retrain.launcher == "prefect" and retrain.flow_run_id
    assert retrain.status == DONE and retrain.review_id == action["review_id"]
    from prefect.client.orchestration import get_client

    with get_client(sync_client=True) as client_api:
        run = client_api.read_flow_run(retrain.flow_run_id)
        assert client_api.read_flow(run.flow_id).name == "train"
        assert run.state.is_completed() and run.parent_task_run_id is not None  # a subflow
    assert task_names(retrain.flow_run_id) == (*train_job.STEPS, "validate-and-promote")
    # Approval as in process: nobody asked, nothing promoted, the outcome says how a
    # person promotes it; and it says what the retrain trained on, as in process.
    assert retrain.approval_timeout_s == 3600 and retrain.decision is None
    assert not retrain.promoted
    assert registry.alias_version(tracking, config.model.name, "champion") == champion
    if retrain.passed:
        assert f"driftgate promote --candidate {retrain.candidate_version}" in retrain.outcome
    assert retrain.detail.startswith("trained on the configured data")
    from driftgate.stores.factories import review_store

    reviews = review_store(config)
    try:
        evidence = reviews.get(action["review_id"]).evidence
    finally:
        reviews.close()
    assert f"prefect:flow-run/{retrain.flow_run_id}" in evidence
    versions = client.search_model_versions(f"name='{config.model.name}'")
    assert {str(v.version) for v in versions} == {champion, retrain.candidate_version}


def test_a_candidate_nobody_approves_in_time_is_not_promoted_and_frees_the_slot(
    trained_model, tmp_path
):
    from driftgate.jobs.retrain import ApprovalTimeout
    from driftgate.monitors.rules import RetrainSettings

    settings = RetrainSettings(approval="required", approval_timeout="1s")
    project = open_project(trained_model, tmp_path, f"{MODEL}-timeout", settings)
    config = project["config"]
    try:
        taken = fire(project, "2031-03-01")
        (run,) = train_runs(config)
        with pytest.raises(ApprovalTimeout, match="no decision within 1 s: not promoted"):
            train_flow(**run.parameters)
        (retrain,) = retrains(config)
        assert retrain.status == "failed" and "no decision within 1 s" in retrain.detail
        assert (retrain.decision, retrain.decided_by) == ("timed out", "-")
        review = project["ports"].reviews.get(taken.review_id)
        assert any("timed out by -: no decision within 1 s" in item for item in review.evidence)
        assert registry.alias_version(config.tracking, config.model.name, "champion") is None
        assert fire(project, "2031-03-02").changed  # the slot is free again
    finally:
        for store in project["stores"]:
            store.close()
