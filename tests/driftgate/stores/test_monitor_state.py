"""Monitor state (hysteresis, the action ledger) on SQLite and on the real PostgreSQL
server, including a database written by the review store before the state moved."""

import pandas as pd
import pytest
from sqlalchemy import create_engine, text

from driftgate.monitors.actions import ActionTaken
from driftgate.monitors.rules import Monitor, MonitorResult
from driftgate.stores.monitor_state import MonitorStateStore

W1 = ("2026-01-01T00:00:00Z", "2026-01-01T01:00:00Z")
W2 = ("2026-01-01T01:00:00Z", "2026-01-01T02:00:00Z")
W3 = ("2026-01-01T02:00:00Z", "2026-01-01T03:00:00Z")


@pytest.fixture
def store(store_url):
    opened = MonitorStateStore(store_url)
    yield opened
    opened.close()


def monitor(consecutive):
    return Monitor(
        name="kl",
        metric="kl",
        threshold=0.1,
        schedule="0 * * * *",
        action="open_review",
        consecutive_breaches=consecutive,
    )


def result(breached, status="ok"):
    return MonitorResult(
        monitor="kl",
        metric="kl",
        action="open_review",
        threshold=0.1,
        breached=breached,
        observed=0.2 if breached else 0.01,
        status=status,
    )


def advance(store, rule, outcome, window):
    return store.advance(
        model_name="m",
        model_version="3",
        monitor=rule,
        result=outcome,
        window_start=window[0],
        window_end=window[1],
    )


def test_hysteresis_state_counts_windows_once_and_in_order(store):
    rule = monitor(consecutive=2)
    assert advance(store, rule, result(True), W1).fire is False
    assert advance(store, rule, result(True), W1).consecutive == 1  # re-run: not counted again
    second = advance(store, rule, result(True), W2)
    assert (second.consecutive, second.fire) == (2, True)
    assert advance(store, rule, result(True), W2).fire is True  # re-run: same decision
    assert advance(store, rule, result(True), W1).fire is False  # an older window: no change
    assert advance(store, rule, result(False), W3).consecutive == 0


def test_a_breach_that_does_not_fire_says_why(store):
    """Issue 15 item 4: every breach that does not fire carries its reason."""
    rule = monitor(consecutive=2)
    first = advance(store, rule, result(True), W1)
    assert not first.fire and first.why == "hysteresis: breach 1 of 2 in a row needed to fire"
    again = advance(store, rule, result(True), W1)  # the same window judged again
    assert not again.fire and "judged before and did not fire then" in again.why
    assert advance(store, rule, result(True), W2).fire  # the second in a row fires
    older = advance(store, rule, result(True), W1)
    assert not older.fire and "state ahead of this window" in older.why


def test_the_latest_verdict_follows_the_newest_window(store):
    from driftgate.monitors.hysteresis import Firing

    def record(outcome, window, fired=False):
        store.record_status(
            model_name="m", model_version="3", result=outcome, firing=Firing(1, fired),
            window_start=window[0], window_end=window[1],
        )  # fmt: skip

    assert store.latest_statuses("m") == []
    record(result(True), W2, fired=True)
    record(result(False, status="insufficient_data"), W1)  # a catch-up of an older window
    (latest,) = store.latest_statuses("m")
    assert (latest["status"], latest["breached"], latest["fired"]) == ("ok", True, True)
    assert latest["window_end"].startswith("2026-01-01T02:00")
    record(result(False, status="insufficient_data"), W3)
    (latest,) = store.latest_statuses("m")
    assert latest["status"] == "insufficient_data" and latest["model_version"] == "3"
    assert store.latest_statuses("another-model") == []


def test_the_ledger_remembers_each_window_acted_on_once(store):
    assert store.action_taken("m", "3", "kl", *W1) is None
    first = ActionTaken("kl", "open_review", "review rv-1 opened", "rv-1", True)
    store.record_action("m", "3", *W1, first)
    store.record_action("m", "3", *W1, ActionTaken("kl", "open_review", "again", "rv-2", True))
    assert store.action_taken("m", "3", "kl", *W1) == first  # the first record wins
    assert store.action_taken("m", "3", "kl", *W2) is None
    assert store.action_taken("m", "4", "kl", *W1) is None
    assert store.action_taken("m", "3", "other", *W1) is None


def test_state_written_by_the_review_store_before_the_move_keeps_working(tmp_path):
    """The old schema: the review store created ``driftgate_monitor_state`` itself."""
    url = f"sqlite:///{tmp_path / 'old.db'}"
    engine = create_engine(url)
    with engine.begin() as connection:
        connection.execute(
            text(
                "CREATE TABLE driftgate_monitor_state (model_name VARCHAR(256) NOT NULL, "
                "model_version VARCHAR(64) NOT NULL, monitor VARCHAR(256) NOT NULL, "
                "consecutive INTEGER NOT NULL, last_window_start_us BIGINT, "
                "last_window_end_us BIGINT, last_fire BOOLEAN NOT NULL, "
                "PRIMARY KEY (model_name, model_version, monitor))"
            )
        )
        end_us = pd.Timestamp(W1[1]).value // 1000
        start_us = pd.Timestamp(W1[0]).value // 1000
        connection.execute(
            text(
                "INSERT INTO driftgate_monitor_state VALUES "
                f"('m', '3', 'kl', 1, {start_us}, {end_us}, 0)"
            )
        )
    engine.dispose()
    state = MonitorStateStore(url)
    try:
        assert pd.Timestamp(state.last_window_end("m", "3", "kl")) == pd.Timestamp(W1[1])
        second = advance(state, monitor(consecutive=2), result(True), W2)
        assert (second.consecutive, second.fire) == (2, True)  # counted on from the old row
        assert state.action_taken("m", "3", "kl", *W2) is None  # the new table was created
    finally:
        state.close()
