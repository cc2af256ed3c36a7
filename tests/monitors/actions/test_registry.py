"""The actions registry: discovered modules, unknown names listing the known ones."""

import pytest

from driftgate.monitors.actions import (
    ACTIONS,
    Action,
    UnknownActionError,
    get_action,
    register_action,
)


def test_every_action_module_is_registered_with_its_idempotency_contract():
    assert sorted(ACTIONS) == ["notify", "open_review", "pause_inference", "retrain"]
    assert all(action.idempotency and action.description for action in ACTIONS.values())


def test_an_unknown_action_lists_the_known_ones():
    with pytest.raises(UnknownActionError, match="known actions: notify, open_review"):
        get_action("page_someone")


def test_an_action_without_an_idempotency_contract_or_a_second_one_is_refused():
    with pytest.raises(ValueError, match="idempotency"):
        register_action(Action("toy", lambda request, ports: None, "toy", " "))
    with pytest.raises(ValueError, match="already registered"):
        register_action(ACTIONS["notify"])
    assert "toy" not in ACTIONS
