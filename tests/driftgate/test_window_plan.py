"""Which windows a drift-check run judges: the current one, after any missed since the
last judged window (catch-up), oldest first and bounded."""

from __future__ import annotations

import pandas as pd
import pytest

from driftgate.core.yamlconfig import ConfigError
from driftgate.gates.config import load_gate_config
from driftgate.jobs.window_plan import plan_windows

END = pd.Timestamp("2035-06-01T12:00", tz="UTC")


@pytest.fixture
def gates():
    return load_gate_config()


def spans(planned):
    return [(start.strftime("%d %H:%M"), end.strftime("%d %H:%M")) for start, end, _ in planned]


def test_without_history_each_window_length_gets_its_current_window(gates):
    planned = plan_windows(gates, end=END)
    lengths = {m.window for m in gates.monitors}
    assert len(planned) == len(lengths)
    assert all(end == END for _, end, _ in planned)
    assert sorted(m.name for *_, group in planned for m in group) == sorted(
        m.name for m in gates.monitors
    )


def test_missed_windows_come_first_oldest_first(gates):
    last = {"mean-shift-kl": END - pd.Timedelta(hours=3)}
    planned = plan_windows(
        gates, end=END, window="1h", names=["mean-shift-kl"], last_judged=last, max_catch_up=24
    )
    assert spans(planned) == [
        ("01 09:00", "01 10:00"),
        ("01 10:00", "01 11:00"),
        ("01 11:00", "01 12:00"),
    ]


def test_a_run_on_time_has_nothing_to_catch_up(gates):
    last = {"mean-shift-kl": END - pd.Timedelta(hours=1)}
    planned = plan_windows(
        gates, end=END, window="1h", names=["mean-shift-kl"], last_judged=last, max_catch_up=24
    )
    assert spans(planned) == [("01 11:00", "01 12:00")]


def test_catch_up_is_bounded_to_the_newest_missed_windows(gates, caplog):
    last = {"mean-shift-kl": END - pd.Timedelta(hours=100)}
    planned = plan_windows(
        gates, end=END, window="1h", names=["mean-shift-kl"], last_judged=last, max_catch_up=2
    )
    assert spans(planned) == [
        ("01 09:00", "01 10:00"),
        ("01 10:00", "01 11:00"),
        ("01 11:00", "01 12:00"),
    ]
    assert "99 windows missed" in caplog.text


def test_no_catch_up_when_disabled_or_off_schedule(gates):
    last = {"mean-shift-kl": END - pd.Timedelta(hours=5)}
    off = plan_windows(gates, end=END, window="1h", names=["mean-shift-kl"], last_judged=last)
    assert spans(off) == [("01 11:00", "01 12:00")]  # max_catch_up=0
    # Less than a whole window missed before the current one: judged with it, not twice.
    late = {"mean-shift-kl": END - pd.Timedelta(minutes=90)}
    planned = plan_windows(
        gates, end=END, window="1h", names=["mean-shift-kl"], last_judged=late, max_catch_up=24
    )
    assert spans(planned) == [("01 11:00", "01 12:00")]


def test_monitors_with_different_histories_get_their_own_windows(gates):
    names = [m.name for m in gates.monitors]
    assert len(names) >= 2
    last = {names[0]: END - pd.Timedelta(hours=2), names[1]: END - pd.Timedelta(hours=1)}
    planned = plan_windows(
        gates, end=END, window="1h", names=names[:2], last_judged=last, max_catch_up=24
    )
    by_monitor = {
        name: [
            s
            for s, (_, _, g) in zip(spans(planned), planned, strict=True)
            if name in [m.name for m in g]
        ]
        for name in names[:2]
    }
    assert by_monitor[names[0]] == [("01 10:00", "01 11:00"), ("01 11:00", "01 12:00")]
    assert by_monitor[names[1]] == [("01 11:00", "01 12:00")]


def test_unknown_monitor_names_are_listed(gates):
    with pytest.raises(ConfigError, match="unknown monitor"):
        plan_windows(gates, end=END, names=["no-such-monitor"])


@pytest.mark.parametrize("window", ["0m", "0h", "-1h", "1w", "xh"])
def test_a_window_override_that_is_empty_or_unknown_is_refused(gates, window):
    """A zero-length window never advanced the catch-up loop (issue 18: ~1 GB in 25 s)."""
    last = {"mean-shift-kl": END - pd.Timedelta(hours=3)}
    with pytest.raises(ConfigError, match="--window"):
        plan_windows(gates, end=END, window=window, last_judged=last, max_catch_up=24)


def test_a_long_outage_with_a_short_window_plans_only_the_newest_windows(gates):
    last = {"mean-shift-kl": END - pd.Timedelta(days=365)}
    planned = plan_windows(
        gates, end=END, window="1s", names=["mean-shift-kl"], last_judged=last, max_catch_up=2
    )
    assert [(s.isoformat(), e.isoformat()) for s, e, _ in planned] == [
        ("2035-06-01T11:59:57+00:00", "2035-06-01T11:59:58+00:00"),
        ("2035-06-01T11:59:58+00:00", "2035-06-01T11:59:59+00:00"),
        ("2035-06-01T11:59:59+00:00", "2035-06-01T12:00:00+00:00"),
    ]


def test_a_long_window_ending_in_1678_starts_at_the_earliest_storable_time(gates):
    """The window's start (end - 366d) fell before 1677-09-21, which pandas cannot
    hold: OutOfBoundsDatetime, a traceback from `drift-check --end 1678-02-01`."""
    from driftgate.stores.samples import EARLIEST_TIMESTAMP

    planned = plan_windows(gates, end="1678-02-01T00:00:00Z", window="366d")
    assert [(start, end) for start, end, _ in planned] == [
        (pd.Timestamp(EARLIEST_TIMESTAMP), pd.Timestamp("1678-02-01", tz="UTC"))
    ]


def test_a_window_end_beyond_the_storable_times_is_refused(gates):
    """A flow run's `end` reaches plan_windows without the CLI's check."""
    with pytest.raises(ValueError, match=r"9999-12-31.*outside \[1678-01-01, 2262-01-01\)"):
        plan_windows(gates, end="9999-12-31T00:00:00Z")
