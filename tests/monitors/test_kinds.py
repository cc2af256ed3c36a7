"""Issue 27: monitor kinds are a registry, and adding one is one module.

The toy ``row_count`` kind is the Python block of docs/architecture.md's "Adding a
monitor kind" (read out of the doc, so the doc cannot rot). Written as a user's package
beside ``gates.yaml`` and listed under ``plugins:``, it runs through the real
``driftgate drift-check`` on the session's trained champion (the fixtures of the
statistic's worked example, tests/monitors/stattests/test_extension.py).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from driftgate.core.yamlconfig import ConfigError
from driftgate.monitors.kinds import KINDS, kind_of
from driftgate.monitors.rules import Monitor, check_monitors_against
from tests.conftest import REPO_ROOT
from tests.monitors.stattests.test_extension import champion, check, project  # noqa: F401


def docs_example() -> str:
    text = (REPO_ROOT / "docs" / "architecture.md").read_text()
    section = text[text.index("#### Adding a monitor kind") :]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


def monitor(metric: str, **options) -> Monitor:
    return Monitor(name="m", metric=metric, threshold=0.05, schedule="0 * * * *",
                   action="notify", **options)  # fmt: skip


@pytest.mark.parametrize(
    "metric, kind",
    [
        ("contract:range", "contract"),
        ("prediction_drift", "prediction_drift"),
        ("performance_estimate:accuracy", "performance_estimate"),
        ("performance:roc_auc", "performance"),
        ("rejected_share:range", "traffic"),
        ("latency_p95", "traffic"),
        ("kl", "drift"),
        ("no_such_statistic", "drift"),
    ],
)
def test_every_metric_has_one_kind(metric, kind):
    assert kind_of(metric).name == kind
    assert sum(k.matches(metric) for k in KINDS) >= 1


def test_an_unknown_metric_names_every_kind_s_syntax():
    with pytest.raises(ValueError) as caught:
        monitor("hellinger2")
    message = str(caught.value)
    for syntax in ("contract:<rule kind>", "prediction_drift", "performance_estimate:<metric>",
                   "performance:<metric>", "rejected_share:<rule kind>"):  # fmt: skip
        assert syntax in message, message


def test_each_kind_checks_the_project_its_own_way():
    with pytest.raises(ConfigError) as caught:
        check_monitors_against(
            [monitor("kl", features=["nope"]), monitor("performance:accuracy", features=["a"]),
             monitor("contract:range"), monitor("error_share", features=["a"])],
            ["a"],
        )  # fmt: skip
    problems = str(caught.value).splitlines()
    assert problems == [
        "monitor 'm': features: not features of the model: nope (known: a)",
        "monitor 'm': features: a performance monitor judges the model's output, not "
        "features; leave features out",
        "monitor 'm': metric contract:range: the project has no data contract",
        "monitor 'm': features: error_share is per request; use all",
    ]


def test_a_kind_from_the_docs_runs_through_the_cli(champion, tmp_path):  # noqa: F811
    """One module, no other file: its metric loads, the window is judged by it, and
    its result is in the report; a window of 800 rows under a threshold of 1,000 breaches."""
    code = docs_example()
    folder = project(champion, tmp_path, "", {"name": "rows", "metric": "row_count",
                                              "threshold": 1000, "calibrated": False})  # fmt: skip
    (folder / "my_stats" / "hellinger.py").unlink()
    (folder / "my_stats" / "row_count.py").write_text(code)
    done = check(folder)
    assert done.returncode == 1, done.stdout[-2000:] + done.stderr[-3000:]
    assert "Traceback" not in done.stderr
    report = Path(re.search(r"report: (\S+)", done.stdout).group(1)).parent
    (result,) = json.loads((report / "monitors.json").read_text())
    assert result["metric"] == "row_count" and result["status"] == "ok"
    assert result["observed"] == 800.0 and result["breached"] is True
    assert result["reason"] == "800 rows, threshold 1000"
    plan = check_plan(folder)
    assert plan.returncode == 0 and "rows" in plan.stdout, plan.stderr[-2000:]


def check_plan(folder: Path):
    from tests.driftgate.test_cli import driftgate

    return driftgate("monitors", "plan", "--rows-per-window", "800", "-c", "driftgate.yaml",
                     cwd=folder)  # fmt: skip
