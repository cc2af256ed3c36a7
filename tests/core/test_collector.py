"""The collector's thresholds: raised for a CLI command, Python's own for the service."""

from __future__ import annotations

import gc
import os
import subprocess
import sys

from driftgate.core import collector


def test_a_command_collects_less_often_and_the_service_as_python_does():
    before = gc.get_threshold()
    try:
        collector.for_a_command()
        assert gc.get_threshold() == collector.COMMAND_THRESHOLDS
        young, middle, full = collector.COMMAND_THRESHOLDS
        assert young > collector.PYTHON_THRESHOLDS[0]
        # The older generations still come round: a full pass within ~10M allocations.
        assert young * middle * full <= 10_000_000
        collector.for_the_service()
        assert gc.get_threshold() == collector.PYTHON_THRESHOLDS
    finally:
        gc.set_threshold(*before)
    assert gc.isenabled()  # thresholds only: every cycle is still collected


def test_the_cli_entry_point_sets_the_command_thresholds_before_a_command_runs():
    """``driftgate.cli:main`` (the console script) sets them before typer runs the
    command: read back inside a command's run (its --help), in a fresh process."""
    code = (
        "import gc, sys, typer\n"
        "from driftgate import cli\n"
        "seen = []\n"
        "def app():\n"
        "    seen.append(gc.get_threshold())\n"
        "cli.app = app\n"
        "cli.main()\n"
        "print(*seen[0])\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
        env={**os.environ, "NO_COLOR": "1"},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert tuple(map(int, done.stdout.split())) == collector.COMMAND_THRESHOLDS
