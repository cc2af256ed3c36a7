"""Waiting inside a flow run for a person's answer to a form in the Prefect UI."""

from __future__ import annotations

from typing import TypeVar

from prefect.exceptions import FlowPauseTimeout
from prefect.flow_runs import pause_flow_run
from prefect.input import RunInput

# How often a paused run asks the Prefect API whether a person answered. Prefect's
# default, 10 s, left a person who had just clicked *resume* (and the tests that play
# one) waiting 5 s on average for nothing; one small read every 2 s costs the API little.
ANSWER_POLL_SECONDS = 2

Form = TypeVar("Form", bound=RunInput)


def ask_person(form: type[Form], timeout_s: int) -> Form | None:
    """Pause this flow run until a person fills in ``form`` (a ``RunInput`` class, its
    description and initial data set with ``with_initial_data``), at most
    ``timeout_s``; the answer, or None when nobody answered in time."""
    try:
        return pause_flow_run(
            wait_for_input=form, timeout=timeout_s, poll_interval=ANSWER_POLL_SECONDS
        )
    except FlowPauseTimeout:
        return None
