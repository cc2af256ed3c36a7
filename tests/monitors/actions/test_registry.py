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


def test_an_action_reads_a_p_value_the_right_way_round():
    """The review said `ks 1.5e-322 > 0.05`: a p-value breaches below its level."""
    import numpy as np
    import pandas as pd

    from driftgate.monitors import ReferenceProfile, check_drift
    from driftgate.monitors.actions.registry import ActionRequest
    from driftgate.monitors.rules import Monitor, drift_tests_of, evaluate_monitor

    rng = np.random.default_rng(0)
    reference = pd.DataFrame({"a": rng.normal(size=2000)})
    current = pd.DataFrame({"a": rng.normal(3.0, 1.0, size=500)})
    profile = ReferenceProfile.fit(reference, sample_rows=0)
    window = (pd.Timestamp("2024-01-01", tz="UTC"), pd.Timestamp("2024-01-02", tz="UTC"))

    def what(metric: str, threshold: float) -> str:
        monitor = Monitor(
            name="m", metric=metric, threshold=threshold, schedule="0 * * * *",
            action="notify", calibrated=False,
        )  # fmt: skip
        thresholds = drift_tests_of([monitor])
        report = check_drift(profile, current, tests=[metric], thresholds=thresholds)
        result = evaluate_monitor(monitor, report)
        assert result.breached
        return ActionRequest("model", "1", *window, result).what

    assert "m: ks p = " in what("ks", 0.05) and " < 0.05 on a (" in what("ks", 0.05)
    assert what("wasserstein", 0.1).startswith("m: wasserstein ")
    assert " > 0.1 on a (" in what("wasserstein", 0.1)


def test_an_actions_text_carries_cramers_v_and_the_levels_that_moved_most():
    """Issue 30: a chi2 breach said `p = ... < 0.05 on island` and nothing of how large
    the change was or which island moved."""
    import numpy as np
    import pandas as pd

    from driftgate.monitors import ReferenceProfile, check_drift
    from driftgate.monitors.actions.registry import ActionRequest
    from driftgate.monitors.rules import Monitor, evaluate_monitor

    islands = ["Biscoe", "Dream", "Torgersen"]
    rng = np.random.default_rng(30)
    reference = pd.DataFrame({"island": rng.choice(islands, 2000, p=[0.49, 0.36, 0.15])})
    current = pd.DataFrame({"island": rng.choice(islands, 400, p=[0.21, 0.61, 0.18])})
    profile = ReferenceProfile.fit(reference, {"island": "categorical"}, sample_rows=0)
    monitor = Monitor(
        name="islands", metric="chi2", threshold=0.05, schedule="0 * * * *",
        action="notify", calibrated=False,
    )  # fmt: skip
    report = check_drift(profile, current, tests=["chi2"], thresholds={"chi2": 0.05})
    result = evaluate_monitor(monitor, report)
    assert result.breached
    chi2 = report.result("island", "chi2")
    effect = result.details["effects"]["island"]
    assert effect["effect"] == "Cramér's V"
    assert effect["effect_size"] == chi2.effect_size > 0.2
    moved = effect["moved"]
    assert {m["level"] for m in moved[:2]} == {"Biscoe", "Dream"}  # the two that moved most
    change = [abs(m["current"] - m["reference"]) for m in moved]
    assert change == sorted(change, reverse=True)
    window = (pd.Timestamp("2024-01-01", tz="UTC"), pd.Timestamp("2024-01-02", tz="UTC"))
    text = ActionRequest("model", "1", *window, result).what
    levels = ", ".join(f"{m['level']} {m['reference']:.2f} -> {m['current']:.2f}" for m in moved)
    assert text.startswith("islands: chi2 p = ")
    assert text.endswith(f"; island: Cramér's V {chi2.effect_size:.2g}, {levels}")
    # The drift report's JSON carries them too.
    (logged,) = [r for r in report.to_dict()["results"] if r["test"] == "chi2"]
    assert logged["effect_size"] == chi2.effect_size
    assert logged["details"]["moved"] == moved
