"""The deployment plan: what `driftgate deploy` registers, derived from the gate config."""

from __future__ import annotations

import importlib

import pytest

from driftgate.gates.config import load_gate_config
from driftgate.jobs.deploy import describe, plan_deployments


@pytest.fixture
def gates(project_config):
    return load_gate_config(project_config.gates)


def test_each_monitor_gets_a_deployment_on_its_own_cron_schedule(project_config, gates):
    plans = plan_deployments(project_config, gates, config_path="/srv/driftgate.yaml")
    drift = [p for p in plans if p.flow_name == "drift-check"]
    assert [(p.parameters["monitor_names"], p.cron) for p in drift] == [
        ([m.name], m.schedule) for m in gates.monitors
    ]
    assert all(p.parameters["config_path"] == "/srv/driftgate.yaml" for p in plans)
    names = [p.full_name for p in plans]
    assert len(set(names)) == len(names)
    model = project_config.model.name
    assert names[:2] == [f"train/{model}", f"validate-and-promote/{model}"]
    assert plans[0].cron is None and plans[0].parameters["promote"] is True


def test_changing_a_schedule_in_the_gate_config_changes_the_plan(project_config, gates):
    changed = gates.model_copy(
        update={"monitors": [gates.monitors[0].model_copy(update={"schedule": "15 3 * * *"})]}
    )
    plans = plan_deployments(project_config, changed, config_path=None)
    assert [p.cron for p in plans if p.flow_name == "drift-check"] == ["15 3 * * *"]
    assert all("config_path" not in p.parameters for p in plans)
    assert "15 3 * * *" in describe(plans)


def test_entrypoints_name_the_flows_they_deploy(project_config, gates):
    for plan in plan_deployments(project_config, gates, config_path=None):
        module, _, attribute = plan.entrypoint.rpartition(".")
        flow = getattr(importlib.import_module(module), attribute)
        assert flow.name == plan.flow_name


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({"features": ["no_such_feature"]}, "monitor 'mean-shift-kl': features"),
        ({"metric": "contract:finite"}, "checks no 'finite' rule"),
    ],
)
def test_a_monitor_naming_what_the_project_lacks_is_refused_before_scheduling(
    project_config, gates, change, expected
):
    """Issue 18: these passed `deploy --dry-run` and surfaced only at the scheduled run."""
    from driftgate.core.yamlconfig import ConfigError

    wrong = gates.model_copy(update={"monitors": [gates.monitors[0].model_copy(update=change)]})
    with pytest.raises(ConfigError, match=expected):
        plan_deployments(project_config, wrong, config_path=None)


def test_a_project_with_a_contract_gets_the_revise_contract_deployment(project_config, gates):
    """Issue 29: the form a person answers a proposed contract revision in; the drift
    check starts its runs, so it has no schedule and no review of its own."""
    plans = {p.full_name: p for p in plan_deployments(project_config, gates, config_path=None)}
    plan = plans[f"revise-contract/{project_config.model.name}"]
    assert plan.cron is None and "review_id" not in plan.parameters
    without = project_config.model_copy(
        update={"data": project_config.data.model_copy(update={"contract": None})}
    )
    names = [p.full_name for p in plan_deployments(without, gates, config_path=None)]
    assert not any(n.startswith("revise-contract/") for n in names)
