"""One rule decides whether a retrained candidate that passed the gate is promoted
(:func:`driftgate.jobs.retrain.decide_approval`), wherever the retrain runs: the
in-process launcher and the drift check's train subflow give it nobody to ask, a
deployment's train run gives it a person (the Prefect form). Real retrain and review
stores (SQLite), the shared MLflow store's version for the decision's tags.

The paths end to end: ``test_retrain_job.py`` (in process),
``tests/flows/test_retrain_flow.py`` (the subflow; the deployment approved, rejected,
timed out).
"""

from __future__ import annotations

from datetime import timedelta

import pandas as pd
import pytest

from driftgate.gates.result import CheckResult, GateResult
from driftgate.jobs.retrain import Answer, ApprovalTimeout, decide_approval, load_retrain
from driftgate.stores.factories import retrain_store
from tests.conftest import mlflow_client


@pytest.fixture
def project(trained_model, tmp_path):
    config = trained_model.config.model_copy(deep=True)
    config.home = str(tmp_path / "home")
    config.serving = config.serving.model_copy(
        update={"control_store_url": f"sqlite:///{tmp_path / 'control.db'}"}
    )
    return config, trained_model.outcome.registered.version


def claim(config, champion: str, day: str, approval_timeout_s: int | None):
    store = retrain_store(config)
    try:
        start = pd.Timestamp(day, tz="UTC")
        return store.claim(
            model_name=config.model.name,
            champion_version=champion,
            monitor="mean-shift-kl",
            window_start=start,
            window_end=start + pd.Timedelta(days=1),
            review_id=None,
            lease=timedelta(hours=2),
            approval_timeout_s=approval_timeout_s,
        ).retrain
    finally:
        store.close()


def passed_gate(config, candidate: str) -> GateResult:
    check = CheckResult("min_accuracy", True, "0.87", ">= 0.80", group="promotion")
    return GateResult(config.model.name, candidate, champion=None, checks=[check])


def test_without_approval_the_gate_decides_and_nobody_is_asked(project):
    config, version = project
    retrain = claim(config, version, "2032-01-01", approval_timeout_s=None)

    def ask(brief, timeout_s):
        raise AssertionError("a person was asked though the monitor needs no approval")

    for asker in (None, ask):  # in process / subflow, and a deployment's run
        approval = decide_approval(config, retrain, passed_gate(config, version), asker)
        assert approval.promote and approval.decision is None and approval.note is None


def test_with_approval_nobody_to_ask_leaves_the_candidate_to_a_person(project):
    config, version = project
    retrain = claim(config, version, "2032-01-02", approval_timeout_s=3600)
    approval = decide_approval(config, retrain, passed_gate(config, version), None)
    assert not approval.promote and approval.decision is None
    assert f"driftgate promote --candidate {version}" in approval.note
    assert load_retrain(config, retrain.id).decision is None  # nobody decided


@pytest.mark.parametrize("approve", [True, False], ids=["approved", "rejected"])
def test_with_approval_a_person_asked_decides_and_it_is_recorded(project, approve):
    config, version = project
    retrain = claim(config, version, f"2032-01-0{3 + approve}", approval_timeout_s=3600)
    asked = []

    def ask(brief, timeout_s):
        asked.append((brief, timeout_s))
        return Answer(approve=approve, by="ana", reason="holds on 1990s data")

    approval = decide_approval(config, retrain, passed_gate(config, version), ask)
    decision = "approved" if approve else "rejected"
    assert (approval.promote, approval.decision) == (approve, decision)
    ((brief, timeout_s),) = asked
    assert timeout_s == 3600 and "min_accuracy" in brief and "mean-shift-kl" in brief
    recorded = load_retrain(config, retrain.id)
    assert (recorded.decision, recorded.decided_by) == (decision, "ana")
    tags = mlflow_client(config.tracking.uri).get_model_version(config.model.name, version).tags
    assert tags["driftgate.retrain.decision"] == decision


def test_with_approval_nobody_answering_in_time_is_recorded_and_fails(project):
    config, version = project
    retrain = claim(config, version, "2032-01-06", approval_timeout_s=5)
    with pytest.raises(ApprovalTimeout, match="no decision within 5 s: not promoted"):
        decide_approval(config, retrain, passed_gate(config, version), lambda brief, s: None)
    recorded = load_retrain(config, retrain.id)
    assert (recorded.decision, recorded.decided_by) == ("timed out", "-")
