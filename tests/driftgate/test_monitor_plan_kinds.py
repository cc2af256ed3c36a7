"""``driftgate monitors plan`` covers every monitor kind or says why not (issue 30): it
printed only ``-`` for output, performance and traffic monitors. Through the installed
CLI on the session's trained binary classifier."""

from __future__ import annotations

import json

from driftgate.monitors.planner import describe, plan_monitor
from driftgate.monitors.rules import Monitor
from tests.driftgate.test_monitor_config_at_load import champion, driftgate  # noqa: F401

KINDS = {
    "inputs-kl": "kl",
    "outputs": "prediction_drift",
    "estimated-accuracy": "performance_estimate:accuracy",
    "realized-accuracy": "performance:accuracy",
    "refused": "rejected_share",
    "errors": "error_share",
    "slow": "latency_p95",
}


def test_every_kind_gets_a_figure_or_a_one_line_reason(champion):  # noqa: F811
    folder, config = champion
    monitors = "".join(
        f"  - {{name: {name}, metric: '{metric}', threshold: 0.05, schedule: '0 * * * *', "
        "window: 1d, action: notify}\n"
        for name, metric in KINDS.items()
    )
    (folder / "kinds.yaml").write_text(f"monitors:\n{monitors}")
    args = ("monitors", "plan", "--gates", "kinds.yaml", "--rows-per-window", "500")
    done = driftgate(*args, "--json", "-c", str(config), cwd=folder)
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    plans = {p["monitor"]: p for p in json.loads(done.stdout)}
    assert list(plans) == list(KINDS)
    for name, plan in plans.items():  # a level (hence false alarms a month) for each
        assert plan["level"] is not None and plan["false_alarms_per_month"] is not None, name
    estimate = plans["estimated-accuracy"]
    assert 0.05 <= estimate["min_detectable"] < 1 and estimate["shift_units"] == (
        "drop of accuracy"
    )
    assert 0.05 <= plans["refused"]["min_detectable"] < 0.2
    assert plans["refused"]["shift_units"] == "share of received records"
    assert "needs the labels a window gets" in plans["realized-accuracy"]["note"]
    assert "KS on the output value" in plans["outputs"]["note"]
    assert "requests per window" in plans["errors"]["note"]
    assert "request latencies per window" in plans["slow"]["note"]

    table = driftgate(*args, "-c", str(config), cwd=folder)
    assert table.returncode == 0, table.stderr[-3000:]
    notes = [line for line in table.stdout.splitlines() if line.startswith("note: ")]
    for name in ("outputs", "realized-accuracy", "errors", "slow"):
        assert any(line.startswith(f"note: {name}: ") for line in notes), name
    (row,) = [line for line in table.stdout.splitlines() if line.startswith("estimated-accuracy")]
    assert f"{estimate['min_detectable']:.3g}" in row.split()


def test_a_contract_monitor_says_it_is_a_fact_not_a_test():
    monitor = Monitor(
        name="schema", metric="contract:any", threshold=0, schedule="0 * * * *",
        action="notify",
    )  # fmt: skip
    plan = plan_monitor(monitor, None, 100)
    assert plan.level is None and plan.false_alarms_per_month is None
    assert plan.note.startswith("a failed contract rule is a fact, not a test")
    assert "note: schema: a failed contract rule is a fact" in describe([plan], 12)
    uncalibrated = plan_monitor(
        monitor.model_copy(update={"metric": "error_share", "calibrated": False}), None, 100
    )
    assert uncalibrated.level is None
    assert uncalibrated.note.startswith("calibrated: false: decided on its bare threshold")
