"""Monitor rules refused when gates.yaml loads, or where the project is known.

A typo in a monitor must be an exit 2 naming the file and key at ``deploy`` or at the
drift check's start, never a traceback at the scheduled run, a status ``error`` with
exit 0, or a silent ``ok``.
"""

from __future__ import annotations

import pandas as pd
import pytest
import yaml

from driftgate.config import rainfall_contract_path
from driftgate.core.yamlconfig import ConfigError
from driftgate.data_contracts import Contract
from driftgate.gates.config import load_gate_config
from driftgate.monitors.rules import (
    CONTRACT_RULE_KINDS,
    Monitor,
    check_monitors_against,
    parse_duration,
)

RULE = {
    "name": "kl-rule",
    "metric": "kl",
    "features": "all",
    "threshold": 0.1,
    "schedule": "0 * * * *",
    "window": "1h",
    "action": "open_review",
}


def gates_file(tmp_path, **changes):
    path = tmp_path / "gates.yaml"
    path.write_text(yaml.safe_dump({"monitors": [{**RULE, **changes}]}))
    return path


def refusal(tmp_path, **changes) -> str:
    with pytest.raises(ConfigError) as raised:
        load_gate_config(gates_file(tmp_path, **changes))
    return str(raised.value)


def test_the_committed_rules_load():
    assert [m.name for m in load_gate_config().monitors] == ["mean-shift-kl", "missing-values"]


def test_an_unknown_statistic_is_refused_listing_the_known_ones(tmp_path):
    message = refusal(tmp_path, metric="kll")
    assert "gates.yaml: monitors.0.metric" in message
    assert "unknown statistic 'kll'" in message and "kl, ks" in message


def test_an_unknown_contract_rule_kind_is_refused(tmp_path):
    message = refusal(tmp_path, metric="contract:bogus_rule")
    assert "monitors.0.metric" in message and "bogus_rule" in message and "nulls" in message


def test_an_unknown_action_is_refused_listing_the_known_ones(tmp_path):
    message = refusal(tmp_path, action="page_someone")
    assert "monitors.0.action" in message
    assert "notify, open_review, pause_inference" in message


@pytest.mark.parametrize("window", ["0h", "0m", "-1h", "1w", "xh", "1.5h", "400d", ""])
def test_empty_unbounded_or_unknown_windows_are_refused(tmp_path, window):
    assert "monitors.0.window" in refusal(tmp_path, window=window)


@pytest.mark.parametrize("schedule", ["a b c d e", "61 * * * *", "0 * * *", "H * * * *"])
def test_a_schedule_the_scheduler_cannot_parse_is_refused(tmp_path, schedule):
    assert "monitors.0.schedule" in refusal(tmp_path, schedule=schedule)


@pytest.mark.parametrize("schedule", ["0 0 30 2 *", "0 0 31 4 *", "0 12 31 2,4,6,9,11 *"])
def test_a_schedule_that_never_fires_is_refused_naming_the_monitor(tmp_path, schedule):
    """Prefect and croniter accept these (each field is valid); no date matches them.
    They loaded, and counting the checks of the false-alarm budget raised
    CroniterBadDateError in `monitors plan`, `deploy` and every drift check."""
    message = refusal(tmp_path, schedule=schedule)
    assert "gates.yaml: monitors.0.schedule" in message
    assert f"monitor 'kl-rule': cron schedule '{schedule}' never fires" in message


@pytest.mark.parametrize("schedule", ["0 0 29 2 *", "0 0 30 2 1"])
def test_a_rare_schedule_still_loads_and_counts_its_checks(tmp_path, schedule):
    """*control*: 29 February fires every four years; a day of the month and a day of
    the week are either-or in cron (the Mondays of February, 30 February or not).
    Neither fires in the budget's 30 days from 5 January: counted as one check."""
    (monitor,) = load_gate_config(gates_file(tmp_path, schedule=schedule)).monitors
    assert monitor.checks_per_horizon == 1


@pytest.mark.parametrize(
    "schedule",
    ["0 * * * *", "*/30 * * * *", "15 3 * * 1-5", "0 0 1 jan *", "a b c d e", "61 * * * *"],
)
def test_crons_are_judged_as_prefect_judges_them(tmp_path, schedule):
    """Agreement with the scheduler: Prefect's own validator on the same strings."""
    from prefect.client.schemas.schedules import CronSchedule

    try:
        CronSchedule(cron=schedule)
        prefect_accepts = True
    except ValueError:
        prefect_accepts = False
    try:
        Monitor(**{**RULE, "schedule": schedule})
        we_accept = True
    except ValueError:
        we_accept = False
    assert we_accept is prefect_accepts


def test_durations():
    assert parse_duration("30m") == pd.Timedelta(minutes=30)
    assert parse_duration("7d") == pd.Timedelta(days=7)
    assert parse_duration("365d") == pd.Timedelta(days=365)  # the demo's yearly windows
    with pytest.raises(ValueError, match="longer than 0"):
        parse_duration("0s")


def test_every_kind_of_contract_rule_can_be_named():
    """Guards CONTRACT_RULE_KINDS against a new kind of rule in the contract model."""
    contract = Contract.load(rainfall_contract_path())
    data = contract.model_dump(mode="json")
    data["extra_columns"] = "forbid"
    data["columns"]["station"] = {"dtype": "string", "categories": ["a"], "unique": True}
    data["columns"]["raw"] = {"dtype": "float"}
    kinds = {rule.kind for rule in Contract.model_validate(data).rules()}
    assert kinds <= set(CONTRACT_RULE_KINDS)
    assert set(CONTRACT_RULE_KINDS) - kinds == {"any"}


def monitor(**changes) -> Monitor:
    return Monitor(**{**RULE, **changes})


def test_features_a_model_does_not_have_are_refused_naming_the_monitor():
    with pytest.raises(ConfigError) as raised:
        check_monitors_against(
            [monitor(features=["a"]), monitor(name="typo", features=["a", "no_such_feature"])],
            ["a", "b"],
            where="gates.yaml: ",
        )
    message = str(raised.value)
    assert message.startswith("gates.yaml: monitor 'typo': features")
    assert "no_such_feature" in message and "kl-rule" not in message


def test_contract_monitors_need_a_rule_the_contract_checks():
    contract = Contract.load(rainfall_contract_path())
    features = list(contract.columns)
    check_monitors_against([monitor(metric="contract:nulls")], features, contract)
    check_monitors_against(
        [monitor(metric="contract:any", features=["dew_point"])], features, contract
    )
    with pytest.raises(ConfigError, match="checks no 'finite' rule"):
        check_monitors_against([monitor(metric="contract:finite")], features, contract)
    with pytest.raises(ConfigError, match="not columns of contract"):
        check_monitors_against(
            [monitor(metric="contract:nulls", features=["no_such_column"])], features, contract
        )
    with pytest.raises(ConfigError, match="no data contract"):
        check_monitors_against([monitor(metric="contract:nulls")], features, None)


def test_a_statistic_that_fits_none_of_its_features_is_refused_naming_them():
    """chi2 on an all-numeric model loaded, passed `monitors plan` and reported `error`
    on every window with exit 0. Against a reference profile (the drift check's start)
    it is refused, naming the monitor, the statistic and the features' types."""
    import numpy as np

    from driftgate.monitors import ReferenceProfile

    rng = np.random.default_rng(0)
    frame = pd.DataFrame({"x": rng.normal(size=200), "city": rng.choice(["a", "b"], 200)})
    profile = ReferenceProfile.fit(frame, sample_rows=0)
    numeric_only = ReferenceProfile.fit(frame[["x"]], sample_rows=0)
    with pytest.raises(ConfigError) as raised:
        check_monitors_against(
            [monitor(name="cats", metric="chi2", calibrated=False)], numeric_only.features
        )
    assert str(raised.value) == (
        "monitor 'cats': statistic 'chi2' applies to categorical features, and the model "
        "has none: x (numeric)"
    )
    with pytest.raises(ConfigError, match=r"monitor 'pick': .*'ks' applies to numeric .*city is"):
        check_monitors_against(
            [monitor(name="pick", metric="ks", features=["city"])], profile.features
        )
    check_monitors_against(
        [monitor(metric="chi2", calibrated=False)], profile.features
    )  # city fits
    check_monitors_against([monitor(metric="chi2", calibrated=False)], ["x"])  # types unknown
