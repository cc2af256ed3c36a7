"""Evidence across windows (monitors.evidence): the configuration, the budget split
over the scales, the pooled decision of a drift monitor and the planner's figures."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from pydantic import ValidationError

from driftgate.core.yamlconfig import ConfigError
from driftgate.gates.config import load_gate_config
from driftgate.monitors import ReferenceProfile
from driftgate.monitors.budget import per_check_budget, per_scale_check_budgets
from driftgate.monitors.kinds import WindowEvidence, evaluate_all
from driftgate.monitors.planner import describe, plan_monitor
from driftgate.monitors.rules import Monitor
from driftgate.monitors.window import merge_windows, summarise_window

RNG = np.random.default_rng(31)
REFERENCE = pd.DataFrame({f"x{i}": RNG.normal(size=10_000) for i in range(4)})
PROFILE = ReferenceProfile.fit(REFERENCE, sample_rows=0)
POOLED = [1, 3, 12, 24]


def monitor(**changes) -> Monitor:
    settings = {
        "name": "mean-shift-kl",
        "metric": "kl",
        "threshold": 0.1,
        "schedule": "0 * * * *",
        "action": "open_review",
        "window": "1h",
        "evidence": {"scales": POOLED},
    }
    return Monitor(**{**settings, **changes})


def windows(count: int, rows: int, shift: float = 0.0, shifted: int = 0, seed: int = 1):
    """``count`` windows of ``rows`` rows; the last ``shifted`` have x0 moved by
    ``shift`` standard deviations."""
    rng = np.random.default_rng(seed)
    frames = []
    for index in range(count):
        frame = pd.DataFrame({f"x{i}": rng.normal(size=rows) for i in range(4)})
        if index >= count - shifted:
            frame["x0"] += shift
        frames.append(frame)
    return frames


def judged(mon: Monitor, frames: list[pd.DataFrame], pooled: bool = True):
    """The monitor's result on the last window, the earlier ones its history."""
    counts = [summarise_window(PROFILE, frame) for frame in frames]

    def last(k: int):
        return merge_windows(PROFILE, [[c] for c in counts[-k:]])

    evidence = WindowEvidence(profile=PROFILE, counts=counts[-1], pooled=last if pooled else None)
    [result] = evaluate_all([mon], evidence)
    return result


def test_the_budget_split_over_the_scales_sums_to_the_monthly_rate():
    budgets = per_scale_check_budgets(0.05, 720, 1, (1, 3, 12, 24))
    assert budgets == pytest.approx(dict.fromkeys((1, 3, 12, 24), 0.05 / 4 / 720))
    assert sum(q * 720 for q in budgets.values()) == pytest.approx(0.05)
    # The window alone keeps today's level exactly.
    assert per_scale_check_budgets(0.05, 720, 2, (1,))[1] == per_check_budget(0.05, 720, 2)
    # With hysteresis, only scale 1 uses the run; a pooled scale is a union bound.
    two = per_scale_check_budgets(0.05, 720, 2, (1, 12))
    assert two[1] == per_check_budget(0.025, 720, 2) and two[12] == 0.025 / 720


def test_monitor_levels_split_the_budget_and_default_to_the_window_alone():
    settings = monitor().model_dump(exclude={"evidence"})
    assert Monitor(**settings).evidence.scales == [1]  # the default: the window alone
    assert Monitor(**settings).level(4) == pytest.approx(0.05 / 720 / 4)  # as before
    assert monitor().scale_levels(4) == pytest.approx(dict.fromkeys(POOLED, 0.05 / 720 / 16))
    assert monitor().level(4) == pytest.approx(0.05 / 720 / 16)


@pytest.mark.parametrize(
    ("scales", "message"),
    [
        ([3, 12], "must start with 1"),
        ([1, 12, 3], "strictly increasing"),
        ([1, 1], "strictly increasing"),
        ([1, 100_000], "at most"),
        ([], "must start with 1"),
    ],
)
def test_invalid_scales_are_refused_naming_the_key(scales, message):
    with pytest.raises(ValidationError) as error:
        monitor(evidence={"scales": scales})
    [problem] = error.value.errors()
    assert problem["loc"] == ("evidence", "scales") and message in problem["msg"]


def test_pooling_is_refused_where_it_cannot_keep_its_promise():
    with pytest.raises(ValidationError, match=r"evidence\.scales: metric rejected_share"):
        monitor(metric="rejected_share", threshold=0.1)
    with pytest.raises(ValidationError, match="calibrated: false"):
        monitor(calibrated=False)
    with pytest.raises(ValidationError, match="population: all"):
        monitor(population="all")
    with pytest.raises(ValidationError, match="bogus"):
        monitor(evidence={"scales": [1], "bogus": 1})


def test_a_gate_file_with_bad_scales_is_a_config_error_naming_the_key(tmp_path):
    gates = tmp_path / "gates.yaml"
    gates.write_text(
        "monitors:\n"
        "  - name: m\n    metric: kl\n    threshold: 0.1\n    schedule: '0 * * * *'\n"
        "    action: open_review\n    evidence: {scales: [12, 24]}\n"
    )
    with pytest.raises(ConfigError) as error:
        load_gate_config(gates)
    assert error.value.exit_code == 2  # the CLI's usage error, printed without a traceback
    assert "monitors.0.evidence.scales" in str(error.value), str(error.value)


def test_a_small_persistent_shift_is_found_over_the_pooled_windows_not_in_one():
    # 0.6 std on one of 4 features, 60 rows an hour, for the last 12 windows.
    frames = windows(24, 60, shift=0.6, shifted=12, seed=5)
    result = judged(monitor(), frames)
    assert result.breached and result.breached_features == ["x0"]
    assert result.details["window_breached"] is False  # the window alone: no breach
    scales = {s["windows"]: s for s in result.details["scales"]}
    assert scales[1]["rows"] == 60 and not scales[1]["breached"]
    assert scales[12]["breached"] and scales[12]["rows"] == 720
    first = min(k for k, s in scales.items() if s["breached"])
    span = f"over the last {first} windows, {first * 60:,} rows"
    assert result.details["evidence"] == span and result.reason.startswith(span)
    # The window's own figures stay the result's: its level and its p-value.
    assert result.level == pytest.approx(0.05 / 720 / 16)
    assert result.p_value == scales[1]["p_value"]


def test_the_same_windows_do_not_breach_without_drift_or_without_pooling():
    calm = judged(monitor(), windows(24, 60, seed=6))
    assert not calm.breached and "evidence" not in calm.details
    assert [s["rows"] for s in calm.details["scales"]] == [60, 180, 720, 1440]
    shifted = windows(24, 60, shift=0.6, shifted=12, seed=5)
    assert not judged(monitor(evidence={"scales": [1]}), shifted).breached
    no_history = judged(monitor(), shifted, pooled=False)
    assert not no_history.breached
    assert [s["status"] for s in no_history.details["scales"][1:]] == ["no_data"] * 3


def test_a_missing_share_monitor_pools_its_counts_too():
    frames = windows(12, 30, seed=7)
    for frame in frames:  # a sensor silent on 12% of records, reference 0%
        frame.loc[: int(len(frame) * 0.12), "x1"] = np.nan
    missing = monitor(
        name="missing-values", metric="missing_share", threshold=0.05, evidence={"scales": [1, 12]}
    )
    result = judged(missing, frames)
    assert result.breached and result.details["window_breached"] is False
    assert result.details["evidence"] == "over the last 12 windows, 360 rows"


def test_the_planner_shows_the_pooled_rule_beside_the_window_alone():
    plan = plan_monitor(monitor(evidence={"scales": [1]}), PROFILE, 60, within=12)
    assert plan.pooled_scales == POOLED  # suggested for a monitor judging windows alone
    assert plan.pooled_smallest_shift < 0.6 < plan.smallest_shift
    table = describe([plan], 12).splitlines()
    assert table[0].split()[-1] == "pooled" and table[1].endswith("std [1,3,12,24]")
    configured = plan_monitor(monitor(), PROFILE, 60, within=12)
    assert configured.pooled_smallest_shift == pytest.approx(plan.pooled_smallest_shift, rel=0.2)
    # driftgate deploy wants the warnings only: no simulation of the pooled rule.
    assert plan_monitor(monitor(), PROFILE, 60, pooled=False).pooled_smallest_shift is None
    # Scales longer than `within` checks cannot count there.
    short = plan_monitor(monitor(evidence={"scales": [1, 24]}), PROFILE, 60, within=12)
    assert short.pooled_smallest_shift >= plan.smallest_shift
