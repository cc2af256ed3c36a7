"""The penguins example, as a user runs it: ``driftgate --config examples/penguins/
driftgate.yaml`` train → promote → serve (real uvicorn in a child process) → ``driftgate
replay`` (real HTTP, production in event time, the labels of labels.csv 14 days of
event time later) → drift-check, through real MLflow and real SQLite stores.

The data (examples/penguins/make_data.py, from the palmerpenguins package): multiclass
species, a boolean ``male``, a time-zone-aware ``observed_at``, production rows with
missing values, and the production labels in their own file keyed by ``penguin_id``.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from driftgate.config import load_config
from driftgate.jobs.demo import start_service, stop_service, wait_until_ready
from driftgate.stores.samples import open_sample_reader
from tests.conftest import REPO_ROOT, free_port
from tests.examples.conftest import run_cli

pytestmark = pytest.mark.integration

EXAMPLE = REPO_ROOT / "examples" / "penguins"
TOKEN = "penguins-example-token-5c1e"
FEATURES = ["island", "bill_length_mm", "bill_depth_mm", "flipper_length_mm", "body_mass_g", "male"]


def driftgate(config: Path, *args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    """A command as a user types it, with the example's admin token set."""
    return run_cli(config, *args, timeout=timeout, env={"DRIFTGATE_ADMIN_TOKEN": TOKEN})


def test_the_seeded_script_writes_exactly_the_committed_files(tmp_path):
    spec = importlib.util.spec_from_file_location("penguins_make_data", EXAMPLE / "make_data.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.main(tmp_path)
    for name in module.FILES:
        assert (tmp_path / name).read_text() == (EXAMPLE / name).read_text(), name
    reference = pd.read_csv(EXAMPLE / "reference.csv")
    production = pd.read_csv(EXAMPLE / "production.csv")
    # Incomplete rows kept on both sides: missing values are learnt (issue 30).
    assert reference[module.FEATURES].isna().any(axis=1).sum() == 8
    assert production[module.FEATURES].isna().any(axis=1).sum() == 3
    assert reference["observed_at"].str.endswith("+0000").all()  # time-zone-aware


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    """The example folder as a clean clone has it, trained and promoted."""
    root = tmp_path_factory.mktemp("penguins") / "penguins"
    shutil.copytree(EXAMPLE, root, ignore=shutil.ignore_patterns(".driftgate", "__pycache__"))
    config = root / "driftgate.yaml"
    trained = driftgate(config, "train")
    assert trained.returncode == 0, trained.stderr[-3000:]
    promoted = driftgate(config, "promote")
    assert promoted.returncode == 0, promoted.stdout + promoted.stderr[-3000:]
    assert "PASSED: champion -> v" in promoted.stdout
    return config


@pytest.fixture(scope="module")
def service(project):
    """``driftgate serve`` on a free port, stopped after the module."""
    port = free_port()
    os.environ["DRIFTGATE__SERVING__PORT"] = str(port)
    try:
        process = start_service(
            str(project), port, project.parent / "service.log", env={"DRIFTGATE_ADMIN_TOKEN": TOKEN}
        )
    finally:
        del os.environ["DRIFTGATE__SERVING__PORT"]
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until_ready(url, process)
        yield url
    finally:
        stop_service(process)


def test_replay_sends_production_then_its_labels_and_a_rerun_sends_nothing_again(project, service):
    production = pd.read_csv(project.parent / "production.csv")
    labels = pd.read_csv(project.parent / "labels.csv")
    assert set(labels["penguin_id"]) == set(production["penguin_id"])  # a species for each
    first = driftgate(project, "replay", "--url", service, "--labels-after", "14d")
    assert first.returncode == 0, first.stdout + first.stderr[-3000:]
    assert f"replaying {len(production)} rows of" in first.stdout
    assert "in order of observed_at, request ids from 'penguin_id'" in first.stdout
    assert "labels 14 days 00:00:00 (event time) after their requests" in first.stdout
    assert "label_horizon" not in first.stdout  # no warning: the horizon is wall-clock
    config = load_config(project)
    samples = open_sample_reader(config.serving.sample_store(config.home_dir)).read_window(
        "2009-01-01", "2010-01-01"
    )
    # Every production penguin is scored and logged once under its own id, the three
    # with a missing value too: the model learnt missing values from the reference's
    # incomplete rows (issue 30; before, they were left out and these refused, 422).
    assert sorted(samples["request_id"]) == sorted("replay-" + production["penguin_id"])
    incomplete = samples["request_id"].isin(
        "replay-" + production["penguin_id"][production[FEATURES].isna().any(axis=1)]
    )
    assert samples.loc[incomplete, FEATURES].isna().any(axis=1).all()  # stored as missing
    accepted, refused = len(production), 0
    done = first.stdout.strip().splitlines()
    summary = next(line for line in done if line.startswith("done in"))
    assert f"{len(production)}/{len(production)} rows sent: {accepted} accepted, 0 " in summary
    assert f"labels: {accepted} accepted, 0 already stored, 0 refused" in summary
    assert "null not allowed" not in first.stdout

    # A rerun: every answered row is a 409 (already sent), every label a duplicate.
    again = driftgate(project, "replay", "--url", service, "--labels-after", "14d")
    assert again.returncode == 0, again.stdout + again.stderr[-3000:]
    assert f"0 accepted, {refused} refused (422), {accepted} already sent (409)" in again.stdout
    assert f"labels: 0 accepted, {accepted} already stored, 0 refused" in again.stdout
    after = open_sample_reader(config.serving.sample_store(config.home_dir)).read_window(
        "2009-01-01", "2010-01-01"
    )
    assert len(after) == len(samples)  # nothing logged twice


def test_the_drift_check_judges_the_replayed_season_with_its_labels(project, service):
    # (runs after the replay test, in file order)
    checked = driftgate(project, "drift-check", "--end", "2009-12-17", "--window", "60d")
    assert checked.returncode in (0, 1), checked.stdout + checked.stderr[-3000:]
    production = pd.read_csv(project.parent / "production.csv")
    accepted = len(production)  # incomplete rows included
    assert f"{accepted} rows;" in checked.stdout
    realized = next(line for line in checked.stdout.splitlines() if "| realized-accuracy" in line)
    assert f"on {accepted} labels" in realized  # labels.csv's species, joined by penguin_id
    assert "| missing-values" in checked.stdout


def test_an_interrupted_replay_loses_nothing_acknowledged_and_a_rerun_resumes(project, service):
    # The same penguins under other ids (a second production batch), sent slowly so that
    # Ctrl-C lands mid-file.
    production = pd.read_csv(project.parent / "production.csv")
    production["penguin_id"] = production["penguin_id"].str.replace("PAL-", "LATE-")
    batch = project.parent / "production-late.csv"
    production.to_csv(batch, index=False)
    command = [sys.executable, "-m", "driftgate.cli", "--config", str(project), "replay",
               str(batch), "--url", service, "--rate", "10", "--no-labels"]  # fmt: skip
    running = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "NO_COLOR": "1", "DRIFTGATE_ADMIN_TOKEN": TOKEN},
    )  # fmt: skip
    assert running.stdout.readline().startswith("replaying 120 rows")
    time.sleep(2.0)  # about 20 rows at 10 a second
    running.send_signal(signal.SIGINT)
    out, err = running.communicate(timeout=60)
    assert running.returncode == 130, out + err[-3000:]
    assert "Traceback" not in err
    (line,) = [x for x in out.splitlines() if x.startswith("interrupted:")]
    sent, accepted = (
        int(n) for n in re.search(r"(\d+)/120 rows sent: (\d+) accepted", line).groups()
    )
    assert 0 < sent < len(production)
    assert "run the same command again to resume" in line

    resumed = subprocess.run(
        command, capture_output=True, text=True, timeout=300,
        env={**os.environ, "NO_COLOR": "1", "DRIFTGATE_ADMIN_TOKEN": TOKEN},
    )  # fmt: skip
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr[-3000:]
    complete = len(production)  # every row is answered: missing values are learnt
    # What the first run had acknowledged answers 409; the rest is sent now. (A request
    # in flight at the Ctrl-C may be logged without its answer counted: at most one.)
    (summary,) = [x for x in resumed.stdout.splitlines() if x.startswith("done in")]
    done = re.search(r"(\d+) accepted, \d+ refused \(422\), (\d+) already sent", summary)
    now, before = int(done[1]), int(done[2])
    assert before in (accepted, accepted + 1) and now + before == complete
