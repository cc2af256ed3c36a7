"""The demo's per-window row: what each monitor of gates/demo.yaml showed, read from
the drift-check flow's summary, with missing values said as such (never a blank)."""

from __future__ import annotations

from driftgate.jobs.demo import (
    ESTIMATED,
    OUTPUTS,
    REALIZED,
    RECEIVED,
    REFUSED,
    WINDOW_HEADER,
    add_judged,
    window_lines,
)


def summary(**monitors) -> dict:
    return {
        "window": ["1982-05-18T00:00:00+00:00", "1983-05-18T00:00:00+00:00"],
        "rows": 110,
        "breached": ["realized-accuracy"],
        "insufficient_data": [],
        "actions": [
            {"detail": "started retrain rt-1: candidate v2 promoted to champion", "changed": True},
            {"detail": "review rv-1 updated", "changed": False},  # nothing new: not shown
        ],
        "monitors": monitors,
    }


def test_a_window_row_shows_refusals_outputs_estimate_and_realized_accuracy():
    window = summary(
        **{
            REFUSED: {"observed": 0.6986},
            RECEIVED: {"observed": 3.1e-9},
            OUTPUTS: {"observed": 0.00012},
            ESTIMATED: {"observed": 0.7247, "details": {"estimate": 0.7247}},
            REALIZED: {"realized": 0.4091, "labels": 110},
        }
    )
    row, action = window_lines(window)
    assert row.split() == [
        "1982-05-18..1983-05-18", "110", "69.9%", "3.1e-09", "0.00012", "0.725", "0.409", "110",
        "realized-accuracy",
    ]  # fmt: skip
    assert action.strip() == "-> started retrain rt-1: candidate v2 promoted to champion"
    # Columns line up with the header.
    assert row.index("110") < WINDOW_HEADER.index("rows") + len("rows")


def test_missing_results_are_dashes_and_an_empty_window_says_so():
    window = summary(**{REALIZED: {"realized": None, "labels": 0, "status": "insufficient_data"}})
    window.update(rows=0, breached=[], insufficient_data=[REALIZED], actions=[])
    (row,) = window_lines(window)
    assert row.split()[1:8] == ["0", "-", "-", "-", "-", "-", "0"]
    assert "(insufficient data: realized-accuracy)" in row and "(no accepted samples)" in row


def test_the_plots_draw_the_points_the_demo_collects(tmp_path):
    """(window end, drift metrics, monitor results, champion version) per window, a
    missing realized value and a champion change included."""
    import pandas as pd

    from driftgate.jobs.demo import plot_drift_over_time, plot_performance_over_time

    points = []
    for year in range(6):
        realized = None if year == 5 else 0.8 - 0.05 * year
        monitors = {
            REALIZED: {"realized": realized, "ci": None if realized is None else [0.7, 0.9]},
            ESTIMATED: {"details": {"estimate": 0.8, "standard_error": 0.02}},
            REFUSED: {"observed": 0.1 * year},
        }
        end = pd.Timestamp("1977-01-01", tz="UTC") + pd.Timedelta(days=365 * year)
        points.append((end, {"drift.x.kl": 0.05 * year}, monitors, "1" if year < 3 else "2"))
    plot_performance_over_time(points, tmp_path / "performance.png")
    plot_drift_over_time(points, ["x"], "kl", tmp_path / "kl.png")
    for name in ("performance.png", "kl.png"):
        assert (tmp_path / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_realized_summary_splits_years_by_the_version_serving():
    """The demo's measure of healing (issue 29): realized accuracy per year beside the
    year's majority share, and the mean by the first champion and by retrained ones."""
    import pandas as pd

    from driftgate.jobs.demo import REALIZED, realized_summary_lines

    dates = pd.Series(pd.date_range("1980-01-01", periods=730, freq="D"))
    production = pd.DataFrame({"date": dates, "rain": [0, 0, 0, 1] * 182 + [0, 0]})
    ends = [pd.Timestamp("1981-01-01", tz="UTC"), pd.Timestamp("1982-01-01", tz="UTC")]
    points = [
        (ends[0], {}, {REALIZED: {"realized": 0.5}}, "1"),
        (ends[1], {}, {REALIZED: {"realized": 0.8}}, "2"),
    ]
    lines = realized_summary_lines(points, production, "rain")
    assert any(line.startswith("1982-01-01") and "v2" in line and "0.800" in line for line in lines)
    assert "mean realized accuracy served by the first champion v1: 0.500 (1 years)" in lines
    assert "mean realized accuracy served by retrained champions: 0.800 (1 years)" in lines


def test_the_realized_summary_prints_the_refused_share_and_its_last_five_years():
    """Issue 29's second measure: the refused share per year, and its mean over the
    last five yearly windows (a year without the monitor's figure is left out)."""
    import pandas as pd

    from driftgate.jobs.demo import REALIZED, REFUSED, realized_summary_lines

    dates = pd.Series(pd.date_range("1980-01-01", periods=7 * 365, freq="D"))
    production = pd.DataFrame({"date": dates, "rain": 0})
    shares = [0.5, 0.4, None, 0.1, 0.0, 0.05, 0.0]
    points = [
        (
            pd.Timestamp(f"{1981 + i}-01-01", tz="UTC"),
            {},
            {REALIZED: {"realized": 0.7}}
            | ({} if share is None else {REFUSED: {"observed": share}}),
            "1",
        )
        for i, share in enumerate(shares)
    ]
    lines = realized_summary_lines(points, production, "rain", pd.Timestamp("1985-01-01", tz="UTC"))
    assert any(line.startswith("1981-01-01") and line.endswith("50.0%") for line in lines)
    assert (
        "mean realized accuracy after the first retrain (its window ended 1985-01-01): "
        "0.700 (2 years)" in lines
    )
    assert any(line.startswith("1983-01-01") and line.endswith("-") for line in lines)
    # The last five windows: None, 0.1, 0.0, 0.05, 0.0 -> the four figures' mean.
    assert lines[-1] == "refused share of the last 4 years (mean of the yearly windows): 3.8%"


def test_a_year_judged_again_updates_its_realized_accuracy_and_keeps_the_rest():
    """The check judges again an earlier year whose late labels just arrived: its
    realized accuracy replaces the first one, its refused share and drift stay (the demo
    unpacked exactly one window and died on two)."""
    import pandas as pd

    first = summary(**{REFUSED: {"observed": 0.3}, REALIZED: {"realized": 0.5, "labels": 300}})
    first["metrics"], first["model_version"] = {"drift.visibility.kl": 2.0}, "1"
    points = []
    add_judged(points, [first], pd.Timestamp(first["window"][1]))
    again = summary(**{REALIZED: {"realized": 0.6, "labels": 365}})
    again.update(metrics={}, model_version="1", actions=[])
    this_year = summary(**{REFUSED: {"observed": 0.0}})
    this_year.update(window=["1983-05-18T00:00:00+00:00", "1984-05-17T00:00:00+00:00"])
    this_year.update(metrics={}, model_version="1")
    lines = add_judged(points, [again, this_year], pd.Timestamp(this_year["window"][1]))
    assert lines[0].endswith("(judged again: late labels)")
    assert not any(line.endswith("late labels)") for line in lines[1:])
    assert [end.year for end, *_ in points] == [1983, 1984]
    (_, metrics, monitors, _) = points[0]
    assert monitors[REALIZED] == {"realized": 0.6, "labels": 365}
    assert monitors[REFUSED] == {"observed": 0.3} and metrics == {"drift.visibility.kl": 2.0}
