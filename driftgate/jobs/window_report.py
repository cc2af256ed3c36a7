"""The drift check's ``report`` step (7 of :data:`driftgate.jobs.drift_check.STEPS`):
the Evidently HTML report of the window, for people, rendered last (here, or in a child
process that outlives the command) and added to the window's MLflow run.

Its own module: nothing decided or done depends on it, and Evidently is imported only
when a report is rendered (``monitors/report.py``).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path

from driftgate import registry
from driftgate.config import ProjectConfig
from driftgate.jobs.window_types import WindowSamples, WindowVerdict

log = logging.getLogger(__name__)


EVIDENTLY_REPORT = "evidently.html"


def report(
    config: ProjectConfig,
    window: WindowSamples,
    verdict: WindowVerdict,
    background: Mapping[str, str] | None = None,
) -> WindowVerdict:
    """The Evidently HTML report of the window, for people: written beside the summary
    (``evidently.html``, its path on the verdict and in the summary) and added to the
    window's MLflow run (artifact ``report/evidently.html``).

    Last, off the decision's path: importing Evidently and building its report took
    most of a check (2.7 s of 3.7 s warm on an 8,159-row window, 5 s of imports in a
    fresh process), and nothing decided or done depends on it. A report that fails is a
    warning; the verdict stands.

    ``background``: render it in a child process that outlives this one (what
    ``driftgate drift-check`` asks, so that its user waits for the verdict only): the
    arguments that reach this window again (``config``, ``source``: the command's own,
    or absent); the child reads the window as ``read`` does and writes the same
    files. Default: here, before returning.
    """
    if not config.monitoring.evidently_report or window.rows == 0:
        return verdict
    path = verdict.report_dir / EVIDENTLY_REPORT
    if background is not None:
        _report_in_background(verdict, background)
        verdict.evidently_report = path
    elif render_report(config, window, path, verdict.run_id):
        verdict.evidently_report = path
    else:
        return verdict
    (verdict.report_dir / "summary.md").write_text(verdict.markdown())
    return verdict


def render_report(config: ProjectConfig, window: WindowSamples, path: Path, run_id) -> bool:
    """Render the window's Evidently report at ``path`` and add it to run ``run_id``;
    False (and a warning) if that failed."""
    from driftgate.monitors.report import render_evidently_report

    try:
        render_evidently_report(window.profile, window.current, path)
        if run_id is not None:
            registry.log_run_artifacts(config.tracking, run_id, {"report": path})
    except Exception as exc:  # a report for people must not change the verdict
        log.warning("Evidently report not rendered: %s", exc)
        return False
    return True


def _report_in_background(verdict: WindowVerdict, how: Mapping[str, str]) -> None:
    """Start ``driftgate render-report`` for the window in its own session (it outlives
    this process); its output goes to ``evidently.log`` beside the report."""
    import subprocess
    import sys

    command = [
        sys.executable, "-m", "driftgate.cli", "render-report",
        "--start", verdict.start.isoformat(), "--end", verdict.end.isoformat(),
        "--version", verdict.model_version, "--into", str(verdict.report_dir),
        *(["--run-id", verdict.run_id] if verdict.run_id else []),
        *[item for key, value in how.items() if value for item in (f"--{key}", value)],
    ]  # fmt: skip
    with (verdict.report_dir / "evidently.log").open("ab") as out:
        subprocess.Popen(
            command, stdin=subprocess.DEVNULL, stdout=out, stderr=out, start_new_session=True
        )
