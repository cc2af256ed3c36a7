"""Issue 27: adding a statistic is one module, and it holds all the way through.

The toy ``hellinger`` statistic is the Python block of docs/architecture.md's "Adding a
statistic" (read out of the doc, so the doc cannot rot). Written as a user's package
``my_stats`` beside ``gates.yaml`` and listed under ``plugins:``, it runs through the
real ``driftgate`` command line on the session's trained champion: before, the config
accepted it, ``monitors plan`` promised a budget for it, and the drift check died in
``ValueError: no calibrated decision for 'hellinger'`` (a traceback).
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

from driftgate import registry
from driftgate.jobs.drift_check import load_champion_profile
from driftgate.stores.samples import SqlSampleStore
from tests.conftest import REPO_ROOT, mlflow_client
from tests.driftgate.test_cli import driftgate
from tests.driftgate.test_drift_check_job import write_window

WINDOW = ("2030-03-01", "2030-03-02")
NULL_LINE = "null=BinnedBootstrap(hellinger_rows),"


def docs_example() -> str:
    """The Python block of docs/architecture.md's "Adding a statistic" section."""
    text = (REPO_ROOT / "docs" / "architecture.md").read_text()
    section = text[text.index("#### Adding a statistic") :]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


def without_null(code: str) -> str:
    """The same statistic, saying it has no no-drift distribution."""
    assert code.count(NULL_LINE) == 1
    return code.replace(NULL_LINE, "null=None,")


@pytest.fixture(scope="module")
def champion(trained_model, tmp_path_factory):
    """The session's trained model as champion, and one drifted window of 800 samples
    in a sample store of this module's own."""
    folder = tmp_path_factory.mktemp("extension")
    config = trained_model.config
    version = trained_model.outcome.registered.version
    mlflow_client(config.tracking.uri).set_registered_model_alias(
        config.model.name, registry.CHAMPION_ALIAS, version
    )
    data = trained_model.data
    late = data.splits.production[data.splits.production["date"].dt.year >= 1990].iloc[:800]
    url = f"sqlite:///{folder / 'samples.db'}"
    store = SqlSampleStore(url)
    write_window(store, late, data.features, WINDOW, version)
    store.close()
    return {"config": config, "url": url, "late": late, "version": version}


def project(champion, folder: Path, code: str, monitor: dict) -> Path:
    """A project in ``folder`` for ``driftgate``: the session's settings, its own home
    and stores, the statistic as package ``my_stats`` and one monitor on it."""
    config = champion["config"]
    package = folder / "my_stats"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "hellinger.py").write_text(code)
    rules = {
        "plugins": ["my_stats"],
        "monitors": [
            {
                "name": "hellinger-all",
                "metric": "hellinger",
                "threshold": 0.1,
                "schedule": "0 * * * *",
                "window": "1d",
                "action": "open_review",
                **monitor,
            }
        ],
    }
    (folder / "gates.yaml").write_text(yaml.safe_dump(rules, sort_keys=False))
    settings = yaml.safe_load((config.root / "driftgate.yaml").read_text())
    settings.update(
        home=str(folder / "home"),
        params=str(config.root / settings["params"]),
        gates=str(folder / "gates.yaml"),
    )
    settings["serving"] = {
        **settings.get("serving", {}),
        "sample_store_url": champion["url"],
        "control_store_url": f"sqlite:///{folder / 'control.db'}",
    }
    settings["monitoring"] = {**settings.get("monitoring", {}), "max_catch_up_windows": 0}
    (folder / "driftgate.yaml").write_text(yaml.safe_dump(settings, sort_keys=False))
    return folder


def expected_hellinger(champion) -> dict[str, float]:
    """H per feature from the champion's profile bins and the window's values, counted
    here with numpy (not the engine's window code): numeric bins are ``[a, b)`` between
    the profile's edges, open at both ends."""
    profile = load_champion_profile(champion["config"], champion["version"])
    values = {}
    for name, reference in profile.features.items():
        column = champion["late"][name].to_numpy(dtype=float)
        column = column[~np.isnan(column)]
        counts = np.bincount(
            np.searchsorted(reference.bin_edges, column, side="right"),
            minlength=reference.bin_edges.size + 1,
        )
        p = reference.bin_counts / reference.bin_counts.sum()
        q = counts / counts.sum()
        values[name] = float(np.sqrt(max(1 - np.sqrt(p * q).sum(), 0.0)))
    return values


def check(folder: Path):
    return driftgate(
        "drift-check", "--window", "1d", "--end", WINDOW[1], "-c", "driftgate.yaml", cwd=folder,
        timeout=300,
    )  # fmt: skip


def test_a_statistic_from_the_docs_runs_through_the_cli_with_its_own_null(champion, tmp_path):
    """One module, no other file: its value in the report, calibrated by its null (a
    p-value, a level, a smallest detectable value), and the planner's figures."""
    folder = project(champion, tmp_path, docs_example(), {})
    done = check(folder)
    assert done.returncode in (0, 1), done.stderr[-3000:]
    assert "Traceback" not in done.stderr
    report = Path(re.search(r"report: (\S+)", done.stdout).group(1)).parent
    (result,) = json.loads((report / "monitors.json").read_text())
    assert result["metric"] == "hellinger" and result["status"] == "ok"
    expected = expected_hellinger(champion)
    assert result["observed"] == pytest.approx(max(expected.values()), rel=1e-9)
    assert 0 < result["p_value"] <= 1 and 0 < result["level"] < 1e-3
    assert result["min_detectable"] >= 0.1 and "calibrated" not in result["details"]
    worst = max(expected, key=expected.get)
    breached = result["p_value"] <= result["level"] and expected[worst] >= 0.1
    assert result["breached"] == breached == (done.returncode == 1)
    assert "| hellinger-all | hellinger |" in done.stdout

    plan = driftgate(
        "monitors", "plan", "--rows-per-window", "800", "-c", "driftgate.yaml", cwd=folder
    )
    assert plan.returncode == 0, plan.stderr[-3000:]
    row = next(line for line in plan.stdout.splitlines() if line.startswith("hellinger-all"))
    cells = row.split()
    # level, false/month, old rule/month, min rows, flags >=: all figures, none "-".
    assert cells[1] == "hellinger" and "-" not in cells[4:9], row


def test_a_statistic_without_a_null_is_refused_for_a_calibrated_monitor_at_load(champion, tmp_path):
    """Exit 2 naming the monitor's key and the statistic, before any store is opened."""
    folder = project(champion, tmp_path, without_null(docs_example()), {})
    done = check(folder)
    assert done.returncode == 2, done.stderr[-3000:]
    assert "Traceback" not in done.stderr
    assert "gates.yaml: monitors.0:" in done.stderr
    assert "monitor 'hellinger-all': statistic 'hellinger' has no no-drift" in done.stderr
    assert "calibrated: false" in done.stderr
    assert not (folder / "home").exists()
    plan = driftgate("monitors", "plan", "--rows-per-window", "800", "-c", "driftgate.yaml",
                     cwd=folder)  # fmt: skip
    assert plan.returncode == 2 and "statistic 'hellinger' has no no-drift" in plan.stderr


def test_a_statistic_without_a_null_is_decided_on_its_threshold_when_not_calibrated(
    champion, tmp_path
):
    """``calibrated: false``: the bare threshold, and the report says so."""
    folder = project(champion, tmp_path, without_null(docs_example()), {"calibrated": False})
    done = check(folder)
    assert done.returncode in (0, 1), done.stderr[-3000:]
    report = Path(re.search(r"report: (\S+)", done.stdout).group(1)).parent
    (result,) = json.loads((report / "monitors.json").read_text())
    expected = expected_hellinger(champion)
    assert result["observed"] == pytest.approx(max(expected.values()), rel=1e-9)
    assert result["details"] == {"calibrated": False}
    assert result["level"] is None and result["p_value"] is None
    assert result["breached"] == (max(expected.values()) >= 0.1) == (done.returncode == 1)


def test_a_plugin_that_does_not_import_is_exit_2_naming_it(champion, tmp_path):
    folder = project(champion, tmp_path, "raise RuntimeError('broken on purpose')\n", {})
    done = check(folder)
    assert done.returncode == 2, done.stderr[-3000:]
    assert "Traceback" not in done.stderr
    assert "gates.yaml: plugins.0: cannot import 'my_stats'" in done.stderr
    assert "broken on purpose" in done.stderr


def test_the_docs_example_in_process_is_the_null_it_is_calibrated_with(tmp_path):
    """The module's value and its null's row formula agree, and the registry is as
    before once the plugin is gone (no other test sees it)."""
    from driftgate.gates.config import load_plugins
    from driftgate.monitors.stattests import STATTESTS, evidence_tests, get_stattest, unregister
    from driftgate.monitors.stattests.binned import BinnedBootstrap

    before = list(STATTESTS)
    (tmp_path / "my_toy_stats").mkdir()
    (tmp_path / "my_toy_stats" / "__init__.py").write_text("")
    (tmp_path / "my_toy_stats" / "hellinger.py").write_text(docs_example())
    try:
        assert load_plugins(["my_toy_stats"], tmp_path / "gates.yaml") == [
            "my_toy_stats",
            "my_toy_stats.hellinger",
        ]
        stat = get_stattest("hellinger")
        assert isinstance(stat.null, BinnedBootstrap) and stat.calibrated
        assert "hellinger" not in evidence_tests()
        p, q = np.array([[0.5, 0.5, 0.0]]), np.array([[0.0, 0.5, 0.5]])
        # 1 - sum sqrt(p q) = 1 - 0.5: H = sqrt(0.5)
        assert stat.null.statistic(p, q)[0] == pytest.approx(np.sqrt(0.5))
    finally:
        unregister("hellinger")
        for name in [m for m in sys.modules if m.split(".")[0] == "my_toy_stats"]:
            del sys.modules[name]
        sys.path.remove(str(tmp_path.resolve()))
    assert list(STATTESTS) == before
