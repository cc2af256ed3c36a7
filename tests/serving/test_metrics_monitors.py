"""``/metrics`` shows the verdicts of the monitors the gate config names (issue 30): a
monitor removed from gates.yaml kept its last series for good. Over real HTTP (uvicorn
in a thread), on the real monitor-state store the drift check writes."""

from __future__ import annotations

import os

from driftgate.monitors.hysteresis import Firing
from driftgate.monitors.rules import MonitorResult
from driftgate.stores.monitor_state import MonitorStateStore
from tests.serving.conftest import ThreadedService, local_settings

MONITOR = "  - {{name: {}, metric: kl, threshold: 0.1, schedule: '0 * * * *', action: notify}}\n"


def gates(path, *names: str) -> None:
    before = path.stat().st_mtime_ns if path.exists() else 0
    path.write_text("monitors:\n" + "".join(MONITOR.format(n) for n in names))
    os.utime(path, ns=(before + 10**9, before + 10**9))  # a change the clock may not show


def series(text: str) -> set[str]:
    return {
        line.split('monitor="')[1].split('"')[0]
        for line in text.splitlines()
        if line.startswith("driftgate_monitor_status{")
    }


def test_a_monitor_removed_from_the_gate_config_leaves_metrics(registered, tmp_path):
    settings = local_settings(tmp_path)
    path = tmp_path / "gates.yaml"
    gates(path, "kept", "removed")
    config = registered.config.model_copy(update={"gates": str(path)})
    state = MonitorStateStore(settings.control_store_url)
    try:
        for name in ("kept", "removed", "never-configured"):
            state.record_status(
                model_name=registered.config.model.name, model_version="1",
                result=MonitorResult(monitor=name, metric="kl", action="notify",
                                     threshold=0.1, breached=False, observed=0.01),
                firing=Firing(0, False), window_start="2040-01-01T00:00",
                window_end="2040-01-01T01:00",
            )  # fmt: skip
    finally:
        state.close()
    registered.set_champion("1")
    with ThreadedService(config, settings) as service:
        assert series(service.client.get("/metrics").text) == {"kept", "removed"}
        gates(path, "kept")  # removed from the file while the service runs
        assert series(service.client.get("/metrics").text) == {"kept"}
        path.write_text("monitors: [")  # mid-write: the names read before hold
        os.utime(path, ns=(1, 1))
        assert series(service.client.get("/metrics").text) == {"kept"}
    gates(path, "kept")
    with ThreadedService(config, settings) as restarted:  # and after a restart
        text = restarted.client.get("/metrics").text
        assert series(text) == {"kept"}
        assert "driftgate_monitor_status_readable 1.0" in text
