"""Label poisoning of a retrain (issue 28, item 2): labels nobody vouched for never
reach the rows the gate scores a candidate on. On real SQLite and PostgreSQL sample and
label stores, labels stored through the one judging path (``submit_labels``, as
``POST /feedback`` stores them) by a named source and by ``unverified`` clients; the
retrain's data folder read back as training and the gate read it."""

from __future__ import annotations

import re

import numpy as np
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


# -- the region guard -------------------------------------------------------------------
GUARD_WINDOW = ("2041-07-01", "2041-07-02")


@pytest.fixture
def answered(project_config, tmp_path):
    """400 served records the champion answered right (P(rain) 0.8 when it rained, else
    0.2): labels unlike its answers are the ones that say something else."""
    return served_window(
        project_config, tmp_path, f"sqlite:///{tmp_path / 'samples.db'}", GUARD_WINDOW, "lg",
        count=400, answers=lambda rows: np.where(rows["rain"].to_numpy() == 1, 0.8, 0.2),
    )  # fmt: skip


def guard_labels(project, unverified_labels) -> object:
    """Records 0..299 labelled by unverified clients as given, 300..399 by ``crm`` with
    their outcomes (the gate's rows are among those); the retrain's data."""
    truth = project["rows"]["rain"].to_numpy().astype(int)
    url = project["url"]
    label(url, GUARD_WINDOW, unverified_labels, "lg", list(range(300)), source=UNVERIFIED)
    label(url, GUARD_WINDOW, truth, "lg", list(range(300, 400)), source="crm")
    return retrain_data(project["config"], "lg", GUARD_WINDOW)


def test_unverified_labels_flipped_in_one_region_are_flagged_and_not_trained_on(answered):
    rows = answered["rows"].iloc[:300]
    truth = answered["rows"]["rain"].to_numpy().astype(int)
    hot = (answered["rows"]["temperature"] > rows["temperature"].quantile(0.8)).to_numpy()
    built = guard_labels(answered, np.where(hot, 1 - truth, truth))
    # All 300 were older than the gate's rows; the guard left every one of them out.
    assert built.unverified == {
        "unverified_train": 0, "unverified_left_out": 300, "unverified_flagged": 1,
    }  # fmt: skip
    assert built.added["train"] == 70  # the verified records' train part alone
    # Named: the feature, its range (the top fifth of temperatures: quantile bins of the
    # unverified labels, so about 60 of 300), how many there contradict the champion.
    found = re.search(
        r"300 unverified label\(s\) left out, flagged for review: (\d+)% of the (\d+) "
        r"unverified labels with temperature in \[[-0-9.e]+, [-0-9.e]+\] contradict the "
        r"champion's answer, 0% elsewhere$",
        built.summary,
    )
    assert found and int(found[1]) >= 90 and 50 <= int(found[2]) <= 70, built.summary


@pytest.mark.parametrize("noise", ["none", "uniform"])
def test_unverified_labels_without_a_region_are_trained_on(answered, noise):
    """Controls: honest labels, and labels wrong at random everywhere (20%): no region
    stands out, so the guard stays quiet and the older unverified labels train."""
    truth = answered["rows"]["rain"].to_numpy().astype(int)
    flip = np.random.default_rng(7).random(len(truth)) < 0.2 if noise == "uniform" else False
    built = guard_labels(answered, np.where(flip, 1 - truth, truth))
    assert built.unverified == {"unverified_train": 300, "unverified_left_out": 0}
    assert built.added["train"] == 370 and "flagged" not in built.summary
