"""Label poisoning of a retrain (issue 28, item 2): labels nobody vouched for never
reach the rows the gate scores a candidate on. On real SQLite and PostgreSQL sample and
label stores, labels stored through the one judging path (``submit_labels``, as
``POST /feedback`` stores them) by a named source and by ``unverified`` clients; the
retrain's data folder read back as training and the gate read it."""

from __future__ import annotations

import pandas as pd
import pytest

from driftgate.jobs.data import prepare_data
from driftgate.jobs.retrain_data import retrain_data
from driftgate.stores.labels import UNVERIFIED
from driftgate.training.prepared import load_splits
from tests.driftgate.stores.conftest import _postgres_database
from tests.driftgate.test_performance_monitor import label
from tests.driftgate.test_retrain_data import ROWS, served_window

WINDOW = ("2041-06-01", "2041-06-02")


@pytest.fixture(params=["sqlite", "postgresql"])
def project(request, project_config, tmp_path):
    urls = (
        iter([f"sqlite:///{tmp_path / 'samples.db'}"])
        if request.param == "sqlite"
        else _postgres_database()
    )
    for url in urls:
        yield served_window(project_config, tmp_path, url, WINDOW, "lp")


def send(url: str, truth, indexes, source: str) -> None:
    label(url, WINDOW, truth, "lp", list(indexes), source=source)


def event_times(indexes) -> list[pd.Timestamp]:
    """The event time write_window gave record ``i`` (the split's ``date``, naive UTC)."""
    start, step = pd.Timestamp(WINDOW[0]), pd.Timedelta(days=1) / ROWS
    return [start + i * step for i in indexes]


def test_unverified_labels_train_only_and_never_reach_the_gates_rows(project):
    config, rows, url = project["config"], project["rows"], project["url"]
    truth = rows["rain"].to_numpy().astype(int)
    verified, poisoned = list(range(0, ROWS, 2)), list(range(1, ROWS, 2))
    send(url, truth, verified, "crm")  # the true outcomes, from a named source
    send(url, 1 - truth, poisoned, UNVERIFIED)  # flipped, by any client
    built = retrain_data(config, "lp-1", WINDOW)
    splits, configured = load_splits(built.folder), project["data"].splits
    window_part = {
        name: getattr(splits, name).iloc[len(getattr(configured, name)) :]
        for name in ("train", "validation", "test")
    }
    # The gate's rows (test) and validation are the newest verified records only: of
    # the 20 verified, round(20 * 0.15) = 3 each, records 28..32 and 34..38.
    assert list(window_part["validation"]["date"]) == event_times([28, 30, 32])
    assert list(window_part["test"]["date"]) == event_times([34, 36, 38])
    assert list(window_part["test"]["rain"]) == truth[[34, 36, 38]].tolist()
    # Train: the 14 older verified records and the unverified ones older than every
    # held-out row (1..27); the 6 newer unverified ones (29..39) are left out.
    older_poisoned = [i for i in poisoned if i < 28]
    assert list(window_part["train"]["date"]) == event_times(sorted(verified[:14] + older_poisoned))
    assert max(window_part["train"]["date"]) < min(window_part["validation"]["date"])
    assert built.added == {"train": 28, "validation": 3, "test": 3}
    assert built.unverified == {"unverified_train": 14, "unverified_left_out": 6}
    assert "14 unverified label(s) in train only" in built.summary
    assert "6 newer unverified label(s) left out" in built.summary
    # The gate's test split as the gate reads it: no poisoned record's time in it.
    gate_rows = prepare_data(built.config, validate_contract=False).splits.test
    assert not set(gate_rows["date"]) & set(event_times(poisoned))
    # Read back by a second opening (the gate, or a worker): the same counts.
    again = retrain_data(config, "lp-1", WINDOW)
    assert again.added == built.added and again.unverified == built.unverified


def test_a_window_of_unverified_labels_only_adds_nothing(project):
    """feedback_auth: none and no named source: nothing a gate could score a candidate
    on that did not come from the clients that would train it."""
    config, rows, url = project["config"], project["rows"], project["url"]
    send(url, 1 - rows["rain"].to_numpy().astype(int), range(ROWS), UNVERIFIED)
    built = retrain_data(config, "lp-2", WINDOW)
    assert built.folder is None and built.config is config
    assert built.summary == (
        "trained on the configured data (too few verified labels in the window to hold "
        "out the gate's rows; its 40 unverified label(s) are not trained on)"
    )
    assert retrain_data(config, "lp-2", WINDOW).summary == built.summary  # decided once
