"""``driftgate replay`` before anything is sent: which rows, in which order, under which
request ids, with which labels, and every mistake named (file, column; exit 2).

The replay over HTTP (a real service, labels, a rerun) is tests/examples/test_penguins.py.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from driftgate.config import load_config
from driftgate.jobs.replay import (
    ReplayError,
    load_production,
    request_id_for,
)
from driftgate.training.data import DataError

CONFIG = """
home: state
data:
  reference: reference.csv
  production: production.csv
  labels: {source: labels.csv, key: order_id, target: returned}
  target: label
  time_column: at
serving:
  accept_client_timestamps: true
"""


@pytest.fixture
def project(tmp_path: Path) -> Path:
    times = pd.date_range("2024-01-01", periods=6, freq="10D", tz="UTC")
    pd.DataFrame(
        {"order_id": range(6), "at": times, "x": [1.0, 2, 3, 4, 5, 6], "label": [0, 1] * 3}
    ).to_csv(tmp_path / "reference.csv", index=False)
    # Production out of time order, one missing value, a whole-float id column.
    production = pd.DataFrame(
        {
            "order_id": [12.0, 10.0, 11.0],
            "at": ["2024-03-05T00:00:00+00:00", "2024-03-01T00:00:00+00:00",
                   "2024-03-03T00:00:00+00:00"],
            "x": [3.0, None, 2.0],
        }
    )  # fmt: skip
    production.to_csv(tmp_path / "production.csv", index=False)
    pd.DataFrame({"order_id": [10, 12], "returned": [1, 0]}).to_csv(
        tmp_path / "labels.csv", index=False
    )
    (tmp_path / "driftgate.yaml").write_text(CONFIG)
    return tmp_path


def test_rows_come_in_event_time_order_with_ids_from_the_key_and_their_labels(project):
    rows = load_production(load_config(project / "driftgate.yaml"))
    assert [request_id_for(v) for v in rows.frame["order_id"]] == [
        "replay-10", "replay-11", "replay-12",
    ]  # fmt: skip
    assert rows.key == "order_id" and rows.time == "at"
    assert rows.labels.tolist()[0] == 1 and pd.isna(rows.labels.iloc[1])
    assert rows.labels.tolist()[2] == 0


def test_an_id_a_request_id_cannot_hold_becomes_a_stable_digest():
    first, again = request_id_for("order 7/é"), request_id_for("order 7/é")
    assert first == again and first.startswith("replay-") and " " not in first
    assert request_id_for("order 8/é") != first


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda p: (p / "driftgate.yaml").write_text(CONFIG.replace(
            "  production: production.csv\n", "")),
         "no production file: give FILE"),
        (lambda p: (p / "driftgate.yaml").write_text(CONFIG.replace(
            "  labels: {source: labels.csv, key: order_id, target: returned}\n", "")),
         "needs the id column of the records"),
        (lambda p: pd.read_csv(p / "production.csv").rename(columns={"order_id": "id"}).to_csv(
            p / "production.csv", index=False),
         "production.csv: data.labels.key column 'order_id' not found"),
        (lambda p: pd.read_csv(p / "production.csv").assign(order_id=[1, 1, 2]).to_csv(
            p / "production.csv", index=False),
         "production.csv: id column 'order_id' repeats (e.g. 1"),
    ],
)  # fmt: skip
def test_each_mistake_is_named_before_anything_is_sent(project, edit, message):
    edit(project)
    with pytest.raises((ReplayError, DataError), match=re.escape(message)) as raised:
        load_production(load_config(project / "driftgate.yaml"))
    assert raised.value.exit_code == 2


def test_the_cli_names_the_mistake_and_exits_2_without_a_traceback(project):
    (project / "driftgate.yaml").write_text(CONFIG.replace("key: order_id", "key: order"))
    done = subprocess.run(
        [sys.executable, "-m", "driftgate.cli", "replay", "--config",
         str(project / "driftgate.yaml"), "--url", "http://127.0.0.1:9"],
        capture_output=True, text=True, timeout=120, env={**os.environ, "NO_COLOR": "1"},
    )  # fmt: skip
    assert done.returncode == 2, done.stdout + done.stderr
    assert "labels.csv: data.labels.key column 'order' not found" in done.stderr
    assert "Traceback" not in done.stderr


def test_without_a_running_service_the_cli_says_where_it_looked(project):
    done = subprocess.run(
        [sys.executable, "-m", "driftgate.cli", "replay", "--config",
         str(project / "driftgate.yaml"), "--url", "http://127.0.0.1:9", "--no-labels"],
        capture_output=True, text=True, timeout=120, env={**os.environ, "NO_COLOR": "1"},
    )  # fmt: skip
    assert done.returncode == 2, done.stdout + done.stderr
    assert "cannot reach the service at http://127.0.0.1:9" in done.stderr
    assert "Traceback" not in done.stderr
