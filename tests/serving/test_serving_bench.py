"""benchmarks/serving_bench.py: the server's CPU per request counts its whole process
group (a child serving for it included) and only while it is alive."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from benchmarks import serving_bench as bench

pytestmark = pytest.mark.skipif(not os.path.isdir("/proc"), reason="reads /proc")

SPIN = "import time\nend = time.process_time() + {s}\nwhile time.process_time() < end: pass\n"


def _spinning_group(seconds: float, children: int = 0) -> subprocess.Popen:
    """A process group whose leader (and ``children`` children) burn ``seconds`` of CPU
    each, then sleep, so the group stays alive to be read."""
    child = (
        f"subprocess.Popen([sys.executable, '-c', {SPIN.format(s=seconds)!r} + 'time.sleep(30)'])"
    )
    code = (
        "import subprocess, sys, time\n"
        + "\n".join([child] * children)
        + "\n"
        + SPIN.format(s=seconds)
        + "time.sleep(30)\n"
    )
    return subprocess.Popen([sys.executable, "-c", code], start_new_session=True)


def _stop(process: subprocess.Popen) -> None:
    bench.stop_group(process, timeout=5)


def _wait_for(pgid: int, at_least: float, timeout: float = 20.0) -> float:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        used = bench.group_cpu_seconds(pgid)
        if used >= at_least:
            return used
        time.sleep(0.05)
    return bench.group_cpu_seconds(pgid)


def test_counts_the_leader_and_its_children():
    process = _spinning_group(0.3, children=1)
    try:
        used = _wait_for(process.pid, 0.55)
        assert used >= 0.55  # two processes of 0.3 s each (tick-rounded)
        assert used < 5.0
    finally:
        _stop(process)


def test_other_groups_are_not_counted():
    busy, idle = _spinning_group(0.3), _spinning_group(0.0)
    try:
        assert _wait_for(busy.pid, 0.25) >= 0.25
        assert bench.group_cpu_seconds(idle.pid) < 0.2  # its interpreter's start-up only
    finally:
        _stop(busy)
        _stop(idle)


def test_a_group_that_is_gone_counts_nothing():
    process = _spinning_group(0.0)
    _stop(process)
    assert bench.group_cpu_seconds(process.pid) == 0.0


def test_turns_are_summarised_as_one_run():
    """``--slices``: a server's turns count as one run of their summed length, its CPU
    per answered request (200s and 422s) over all of them."""
    from benchmarks.loadgen import LoadResult

    first = LoadResult({"a0": 200, "a1": 200, "a2": 422}, [0.001, 0.003], 0, 1.0)
    second = LoadResult({"b0": 200, "b1": 503}, [0.002], 1, 0.5, "reset")
    summary = bench.summarise([(first, 0.3), (second, 0.1)])
    assert summary["ok"] == 3 and summary["refused"] == 1 and summary["errors"] == 1
    assert summary["requests_per_second"] == 2.0  # 3 acknowledged in 1.5 s
    assert summary["answered_per_second"] == round(4 / 1.5, 1)
    assert summary["cpu_us_per_request"] == 100_000.0  # 0.4 s of CPU for 4 answered
    assert summary["p50_ms"] == 2.0
    assert summary["first_error"] == "reset statuses [503]"
