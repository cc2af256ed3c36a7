"""How a job runs its named steps: the one seam between a journey and its orchestration.

A job writes its journey once, as an ordered sequence of ``run_step(name, fn, *args,
**kwargs)`` calls, and lists the names in order in its ``STEPS`` tuple. Without
orchestration the step runner is :func:`call_step` (call the function); a Prefect
flow hands in its own runner (``driftgate.flows.steps.prefect_step``), which runs each
step as a task of that name. So the order and the logic of a journey live only in the
job, and the flow adds retries and the run's history in the Prefect UI, nothing else
(as ``mapper`` and ``launcher`` are injected into the drift check).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

# (step name, step function, *args, **kwargs) -> what the step function returned
StepRunner = Callable[..., Any]


def call_step(name: str, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
    """Run a step here, now: the step runner of every job called without a flow."""
    return fn(*args, **kwargs)
