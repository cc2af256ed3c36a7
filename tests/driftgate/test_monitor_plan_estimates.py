"""``monitors plan`` and estimated metrics (issue 31): a regression champion's
``performance_estimate:rmse|mae`` monitors are planned; a monitor whose metric the
champion's task has no estimate of is exit 2 naming the monitor."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import pytest

from driftgate.core.yamlconfig import ConfigError
from driftgate.gates.config import GateConfig
from driftgate.jobs.monitor_plan import plan_monitors
from driftgate.monitors.outputs import OutputsProfile


@dataclass
class Champion:
    """What the plan reads of the champion's reference profile for output monitors."""

    outputs: OutputsProfile


def gates(*metrics: str) -> GateConfig:
    monitors = [
        {
            "name": f"m{i}",
            "metric": m,
            "threshold": 1.0,
            "schedule": "0 * * * *",
            "action": "notify",
        }
        for i, m in enumerate(metrics)
    ]
    return GateConfig.model_validate({"monitors": monitors})


@pytest.fixture(scope="module")
def regression():
    rng = np.random.default_rng(41)
    x = rng.normal(size=800)
    target = 2 * x + rng.normal(size=800)
    return Champion(
        OutputsProfile.fit("regression", 2 * x, target, features=pd.DataFrame({"x": x}))
    )


def test_a_regressions_estimates_are_planned(regression):
    config = None  # the champion is given: no registry is read
    plans = plan_monitors(
        config,
        gates("performance_estimate:rmse", "performance_estimate:mae"),
        rows_per_window=60,
        profile=regression,
    )
    assert [p.metric for p in plans] == ["performance_estimate:rmse", "performance_estimate:mae"]


def test_a_metric_the_task_has_no_estimate_of_is_exit_2_naming_the_monitor(regression):
    with pytest.raises(ConfigError) as info:
        plan_monitors(
            None,
            gates("performance_estimate:rmse", "performance_estimate:accuracy"),
            rows_per_window=60,
            profile=regression,
        )
    assert info.value.exit_code == 2
    assert str(info.value) == (
        "monitor 'm1': performance_estimate:accuracy does not apply to the champion, a "
        "regression model (estimable: mae, rmse)"
    )
