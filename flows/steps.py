"""The step runner the flows hand to the jobs (:mod:`driftgate.jobs.steps`): each named
step of a journey runs as a Prefect task of that name, so the Prefect UI shows where a
run spent its time or failed, while the steps, their order and their logic stay in the
job. Tasks are not cached: their inputs are data frames, models and open windows, and a
journey run again must run again.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from prefect import Task, task
from prefect.cache_policies import NO_CACHE


@functools.cache
def step_task(name: str, fn: Callable[..., Any]) -> Task:
    """The task that runs step ``fn`` under ``name`` (one per step, made once)."""
    return task(fn, name=name, cache_policy=NO_CACHE)


def prefect_step(name: str, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
    """Run one step of a job as a Prefect task named ``name``, inside the current flow run."""
    return step_task(name, fn)(*args, **kwargs)
