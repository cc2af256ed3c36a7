"""The ``revise-contract`` Prefect flow (issue 29): the proposed contract revision shown in
the Prefect UI's form, written only when the person accepts, declined on the review
otherwise; on the session's Prefect test harness, with a real service refusing records."""

from __future__ import annotations

import json
import threading
import time

import pytest

from driftgate import registry
from driftgate.flows.contract_revision import ContractDecision, revise_contract
from driftgate.stores.factories import review_store
from tests.driftgate.test_contract_revision_job import (  # noqa: F401 (fixture)
    project,
    refused_traffic,
    registry_tags,
    review_refusals,
)
from tests.flows.test_retrain_flow import paused_runs
from tests.serving.conftest import ThreadedService


def form_description(flow_run_id) -> str:
    """The description of the form the paused run waits on (what the person reads)."""
    from prefect.client.orchestration import get_client
    from prefect.input.run_input import keyset_from_paused_state

    with get_client(sync_client=True) as client:
        run = client.read_flow_run(flow_run_id)
        keyset = keyset_from_paused_state(run.state)
        return json.loads(client.read_flow_run_input(flow_run_id, keyset["description"]))


@pytest.mark.parametrize("accept", [True, False], ids=["accepted", "declined"])
def test_the_form_shows_the_diff_and_only_an_accept_writes_the_contract(
    project,  # noqa: F811 (the fixture imported above)
    trained_model,
    accept,
):
    from prefect.flow_runs import resume_flow_run

    path, config, version = project
    good, shifted = refused_traffic(trained_model)
    with ThreadedService(config, config.serving) as service:
        review_id = review_refusals(config, version, service, good, shifted)
    outcome = {}
    worker = threading.Thread(
        target=lambda: outcome.update(
            state=revise_contract(review_id, config_path=str(path), return_state=True)
        ),
        daemon=True,
    )
    worker.start()
    deadline = time.monotonic() + 120
    while not (waiting := paused_runs()) and time.monotonic() < deadline:
        assert worker.is_alive(), "the flow ended without asking"
        time.sleep(0.5)
    (waiting,) = waiting
    shown = form_description(waiting.id)
    assert f"Review {review_id}" in shown and "v1 -> v2" in shown
    assert "columns.sea_level_pressure.max: 0.81 -> " in shown
    # Nothing is written while the person reads.
    assert list(config.contract_revisions_dir.glob("*.yaml")) == []
    tagged_before = registry_tags(config, version).get(registry.TAG_CONTRACT)

    resume_flow_run(waiting.id, run_input={"accept": accept, "reason": "new sensor", "by": "ana"})
    worker.join(timeout=120)
    summary = outcome["state"].result()
    reviews = review_store(config)
    try:
        review = reviews.get(review_id)
    finally:
        reviews.close()
    written = sorted(p.name for p in config.contract_revisions_dir.glob("*.yaml"))
    if accept:
        assert summary["decision"] == "accepted" and summary["version"] == 2
        assert written == ["rainfall.v2.yaml"]
        assert registry_tags(config, version)[registry.TAG_CONTRACT] == "rainfall v2"
        assert review.status == "resolved" and review.resolved_by == "ana"
        assert any("accepted by ana (new sensor)" in line for line in review.evidence)
    else:
        assert summary["decision"] == "declined"
        assert written == []
        assert registry_tags(config, version).get(registry.TAG_CONTRACT) == tagged_before
        assert review.status == "open"
        assert "contract revision declined by ana: new sensor" in review.evidence


def test_the_form_asks_for_a_reason_and_a_name():
    """An empty reason or name is refused by the form itself (pydantic), so every
    decision on a review says who and why."""
    from pydantic import ValidationError

    with pytest.raises(ValidationError):
        ContractDecision(accept=True, reason="", by="ana")
    with pytest.raises(ValidationError):
        ContractDecision(accept=True, reason="why", by="")
