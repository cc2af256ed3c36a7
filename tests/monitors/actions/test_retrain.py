"""``retrain``: accepted in gates.yaml with its settings, refused with clear errors, and
never run where nothing can train. The retrain itself (real training, gate, stores) is
tested in tests/driftgate/test_retrain_job.py and, through Prefect, in
tests/flows/test_retrain_flow.py."""

import pytest

from driftgate.core.yamlconfig import ConfigError
from driftgate.gates.config import load_gate_config
from driftgate.monitors.actions import take_action
from driftgate.monitors.actions.retrain import RetrainUnavailableError

from .conftest import request

RULE = "  - {name: a, metric: kl, threshold: 0.1, schedule: '0 * * * *', action: %s%s}\n"


def load(tmp_path, action, extra=""):
    path = tmp_path / "gates.yaml"
    path.write_text("monitors:\n" + RULE % (action, extra))
    return load_gate_config(path)


def test_retrain_is_an_action_of_gates_yaml_with_a_default_lease(tmp_path):
    (monitor,) = load(tmp_path, "retrain").monitors
    assert monitor.action == "retrain" and monitor.retrain.lease == "6h"
    (monitor,) = load(tmp_path, "retrain", ", retrain: {lease: 90m}").monitors
    assert monitor.retrain.lease_length.total_seconds() == 5400
    assert monitor.retrain.approval == "none" and monitor.retrain.approval_seconds is None
    extra = ", retrain: {lease: 2d, approval: required, approval_timeout: 12h}"
    (monitor,) = load(tmp_path, "retrain", extra).monitors
    assert monitor.retrain.approval_seconds == 12 * 3600
    assert monitor.retrain.cooldown_length is None  # by default: any breach after the last
    (monitor,) = load(tmp_path, "retrain", ", retrain: {cooldown: 30d}").monitors
    assert monitor.retrain.cooldown_length.days == 30
    # retrain.data: by default the breaching window on the configured data; a recent
    # span may be longer than a window's 366 days (its records are read in chunks).
    assert monitor.retrain.data.is_default
    (monitor,) = load(tmp_path, "retrain", ", retrain: {data: {recent: 1095d}}").monitors
    assert monitor.retrain.data.recent_length.days == 1095


def test_the_cooldown_is_given_in_days_in_windows_or_both(tmp_path):
    """Issue 29: event time, so a replay of yearly windows may want decades (no 366-day
    bound), and counted in the monitor's windows as well as in days."""
    from datetime import timedelta

    year = timedelta(days=365)
    (monitor,) = load(tmp_path, "retrain", ", retrain: {cooldown: 7300d}").monitors
    assert monitor.retrain.cooldown_span(year) == timedelta(days=7300)
    (monitor,) = load(tmp_path, "retrain", ", retrain: {cooldown_windows: 20}").monitors
    assert monitor.retrain.cooldown_span(year) == 20 * year
    assert monitor.retrain.cooldown_span(timedelta(hours=1)) == timedelta(hours=20)
    assert monitor.retrain.cooldown_words() == "20 window(s)"
    both = ", retrain: {cooldown: 30d, cooldown_windows: 3}"
    (monitor,) = load(tmp_path, "retrain", both).monitors  # the longer of the two
    assert monitor.retrain.cooldown_span(timedelta(days=1)) == timedelta(days=30)
    assert monitor.retrain.cooldown_span(timedelta(days=30)) == timedelta(days=90)
    assert monitor.retrain.cooldown_words() == "30d / 3 window(s)"
    (monitor,) = load(tmp_path, "retrain").monitors
    assert monitor.retrain.cooldown_span(year) is None


@pytest.mark.parametrize(
    ("action", "extra", "message"),
    [
        (
            "open_review",
            ", retrain: {lease: 1h}",
            r"monitors.0: .*retrain: settings of the retrain action, but this monitor's "
            r"action is 'open_review'",
        ),
        ("retrain", ", retrain: {lease: soon}", r"monitors.0.retrain.lease: .*lease 'soon'"),
        ("retrain", ", retrain: {lease: 0h}", r"monitors.0.retrain.lease: .*empty"),
        ("retrain", ", retrain: {approver: ana}", r"monitors.0.retrain.approver: unknown key"),
        ("retrain", ", retrain: {approval: maybe}", r"monitors.0.retrain.approval: .*'none' or"),
        (
            "retrain",
            ", retrain: {approval_timeout: 1x}",
            r"monitors.0.retrain.approval_timeout: .*approval_timeout '1x' is not a duration",
        ),
        (
            "retrain",
            ", retrain: {approval: required, lease: 6h, approval_timeout: 6h}",
            r"monitors.0.retrain: .*approval_timeout 6h must be shorter than lease 6h",
        ),
        ("retrain", ", retrain: {cooldown: 0d}", r"monitors.0.retrain.cooldown: .*empty"),
        (
            "retrain",
            ", retrain: {cooldown: 3y}",
            r"monitors.0.retrain.cooldown: .*cooldown '3y' is not a duration",
        ),
        (
            "retrain",
            ", retrain: {cooldown: 99999999d}",
            r"monitors.0.retrain.cooldown: .*cooldown .99999999d. is longer than",
        ),
        (
            "retrain",
            ", retrain: {cooldown: 40000d}",
            r"monitors.0.retrain.cooldown: .*longer than the maximum of 36600d",
        ),
        ("retrain", ", retrain: {cooldown_windows: 0}", r"monitors.0.retrain.cooldown_windows: "),
        ("retrain", ", retrain: {cooldown_windows: two}", r"monitors.0.retrain.cooldown_windows: "),
        ("retrain", ", retrain: {cooldown_windows: 1.5}", r"monitors.0.retrain.cooldown_windows: "),
        ("retrain", ", retrain: 3", r"monitors.0.retrain: "),
        (
            "retrain",
            ", retrain: {data: {recent: 3y}}",
            r"monitors.0.retrain.data.recent: .*recent '3y' is not a duration",
        ),
        ("retrain", ", retrain: {data: {rows: 2}}", r"monitors.0.retrain.data.rows: "),
        (
            "retrain",
            ", retrain: {data: {reference: drop}}",
            r"monitors.0.retrain.data.reference: .*'include' or 'exclude'",
        ),
        ("retrain", ", retrain: {data: {days: 30}}", r"monitors.0.retrain.data.days: "),
    ],
)
def test_bad_retrain_settings_name_the_key(tmp_path, action, extra, message):
    with pytest.raises(ConfigError, match=message):
        load(tmp_path, action, extra)


def test_without_a_retrain_port_the_action_refuses_before_changing_anything(stores):
    with pytest.raises(RetrainUnavailableError, match="needs a retrain port"):
        take_action("retrain", request(action="retrain"), stores.ports)
    assert stores.reviews.list() == []
