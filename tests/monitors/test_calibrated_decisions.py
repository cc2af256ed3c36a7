"""Issue 15: decisions that know their sample size, budgets over time, the planner.

Hand-computed values where they exist (budgets, the exact binomial), behaviour where
they do not (a no-drift window of 30 rows no longer breaches KL 0.1; a real shift at
1,000 rows does), and the engine against the bound the benchmark simulates with.
"""

from __future__ import annotations

import math
from datetime import timedelta

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from driftgate.gates.config import load_gate_config
from driftgate.monitors import check_drift
from driftgate.monitors.budget import (
    checks_in,
    expected_false_fires,
    per_check_budget,
    per_test_level,
)
from driftgate.monitors.hysteresis import apply_hysteresis
from driftgate.monitors.nulls import (
    CONDITIONAL_MIN_ROWS,
    _categorical_population,
    _mixture_ratio,
    _permutations,
    _proposals,
    _tilted_draws,
    binned_null,
    binned_statistic,
    conditional_breach,
    conditional_null,
    decision_bound,
    grid_size,
)
from driftgate.monitors.planner import plan_monitor
from driftgate.monitors.profile import ReferenceProfile
from driftgate.monitors.rules import Monitor, evaluate_monitor
from driftgate.monitors.stattests.binned import bin_counts
from driftgate.monitors.window import summarise_window


@pytest.fixture(scope="module")
def normal_profile():
    rng = np.random.default_rng(0)
    frame = pd.DataFrame({f"x{i}": rng.normal(size=10_000) for i in range(4)})
    return ReferenceProfile.fit(frame, sample_rows=0)


def windows(rows, count, seed, shift=0.0, features=4):
    rng = np.random.default_rng(seed)
    for _ in range(count):
        frame = pd.DataFrame({f"x{i}": rng.normal(size=rows) for i in range(features)})
        frame["x0"] += shift
        yield frame


def test_budget_spends_the_rate_over_checks_and_features():
    assert checks_in("0 * * * *", timedelta(days=30)) == 720
    assert checks_in("*/30 * * * *", timedelta(days=30)) == 1440
    assert checks_in("0 9 * * 1", timedelta(days=28)) == 4
    assert per_check_budget(0.05, 720) == pytest.approx(0.05 / 720)
    assert per_test_level(0.05, 720, 8) == pytest.approx(0.05 / 720 / 8)
    # Two breaches in a row: (C - 1) q^2 <= rate.
    q = per_check_budget(0.05, 720, consecutive=2)
    assert q == pytest.approx(math.sqrt(0.05 / 719))
    assert expected_false_fires(q / 8, 720, 8, 2) == pytest.approx(0.05)


@pytest.mark.parametrize(
    "schedule",
    ["0 * * * *", "17 * * * *", "*/30 * * * *", "*/15 * * * *", "* * * * *", "5 */6 * * *",
     "30 9 * * *", "59 23 * * *", "*/7 * * * *", "0 */5 * * *", "0 9 * * 1", "0 0 1 * *",
     "*/20 */2 * * *"],
)  # fmt: skip
def test_fires_counted_without_iterating_equal_croniters_count(schedule):
    # checks_in counts evenly spaced schedules by arithmetic (issue 32: iterating an
    # hourly schedule over 30 days was 0.15 s of a cold drift check); the count must be
    # croniter's, including at the horizon's edges and for steps not dividing the hour
    # (*/7 restarts at minute 0 each hour: 9 fires an hour, not 60 / 7).
    from driftgate.monitors.budget import _iterated_checks_in

    for horizon in (
        timedelta(days=30), timedelta(days=7), timedelta(hours=1), timedelta(minutes=17),
        timedelta(days=1, seconds=1), timedelta(hours=9, minutes=30),
        timedelta(hours=9, minutes=30, microseconds=1),
    ):  # fmt: skip
        assert checks_in(schedule, horizon) == _iterated_checks_in(schedule, horizon), horizon
    assert checks_in("*/7 * * * *", timedelta(hours=1)) == 9


def test_fires_counted_without_iterating_are_capped_and_take_ascii_digits_only():
    # The same cap as the iterated count (a month of minutes over 800 days would be
    # 1,152,000 by arithmetic, 1,000,000 by croniter), and a full-width digit is not a
    # minute: croniter refuses it, so the shortcut must not read it as 5.
    from croniter import CroniterNotAlphaError

    from driftgate.monitors.budget import _MAX_COUNTED

    assert checks_in("* * * * *", timedelta(days=800)) == _MAX_COUNTED
    with pytest.raises(CroniterNotAlphaError):
        checks_in("\uff15 * * * *", timedelta(days=1))


def test_monitor_states_its_budget_and_level():
    monitor = Monitor(
        name="m", metric="kl", threshold=0.1, schedule="0 * * * *", action="open_review"
    )
    assert monitor.false_alarms.rate == 0.05 and monitor.false_alarms.per == "30d"
    assert monitor.level(8) == pytest.approx(0.05 / 720 / 8)
    assert monitor.model_copy(update={"calibrated": False}).level(8) is None
    with pytest.raises(ValueError, match="duration"):
        Monitor(
            name="m",
            metric="kl",
            threshold=0.1,
            schedule="0 * * * *",
            action="open_review",
            false_alarms={"rate": 0.05, "per": "a month"},
        )


def test_missing_share_is_a_one_sided_exact_binomial_test(normal_profile):
    window = next(windows(30, 1, 1))
    window.loc[:8, "x1"] = np.nan  # 9 of 30 missing, reference 0%
    report = check_drift(
        normal_profile,
        window,
        tests=["missing_share"],
        thresholds={"missing_share": 0.05},
        levels={"missing_share": 1e-4},
    )
    result = report.result("x1", "missing_share")
    assert result.p_value == pytest.approx(stats.binom.sf(8, 30, 0.05))
    assert result.drifted == (result.p_value <= 1e-4)
    critical = int(stats.binom.isf(1e-4, 30, 0.05)) + 1
    assert result.min_detectable == pytest.approx(critical / 30)
    assert not report.result("x0", "missing_share").drifted


def test_a_single_row_is_insufficient_data_never_a_breach(normal_profile):
    report = check_drift(normal_profile, next(windows(1, 1, 2)), tests=["kl"], levels={"kl": 1e-5})
    assert {r.status for r in report.results} == {"insufficient_data"}
    assert not any(r.drifted for r in report.results)
    monitor = Monitor(
        name="m", metric="kl", threshold=0.1, schedule="0 * * * *", action="open_review"
    )
    result = evaluate_monitor(monitor, drift_report=report)
    assert result.status == "insufficient_data" and not result.breached
    assert apply_hysteresis(monitor, result, 3).consecutive == 3  # neither counts nor resets


def test_small_no_drift_windows_no_longer_breach_kl_01(normal_profile):
    old = new = 0
    for window in windows(30, 60, 3):
        report = check_drift(normal_profile, window, tests=["kl"], levels={"kl": 0.05 / 720 / 4})
        old += any(r.value >= 0.1 for r in report.results)
        new += any(r.drifted for r in report.results)
    assert old >= 50 and new == 0


def test_a_real_shift_on_a_large_window_breaches_with_its_evidence(normal_profile):
    window = next(windows(2_000, 1, 4, shift=1.0))
    report = check_drift(normal_profile, window, tests=["kl"], levels={"kl": 1e-6})
    hit = report.result("x0", "kl")
    assert hit.drifted and hit.p_value < 1e-6 and hit.value >= 0.1
    assert hit.bias_corrected < hit.value and hit.min_detectable == pytest.approx(0.1)
    assert not report.result("x1", "kl").drifted


def test_ks_reports_its_bias_corrected_d_and_the_smallest_d_its_window_could_flag(
    normal_profile,
):
    """KS's min_detectable was its effect-size floor alone: on a small window the
    smallest significant D is far above it, and that is what a user needs to read."""
    level = 1e-4
    small, large = (
        check_drift(normal_profile, next(windows(rows, 1, 9)), tests=["ks"], levels={"ks": level})
        for rows in (60, 20_000)
    )
    for report, rows in ((small, 60), (large, 20_000)):
        r = report.result("x1", "ks")
        assert not r.drifted and r.effect_size_floor == pytest.approx(0.05)
        # scipy's exact/asymptotic KS at these sizes is the reference: the smallest
        # detectable D is where its p-value crosses the level.
        effective = round(10_000 * rows / (10_000 + rows))
        assert r.min_detectable == pytest.approx(
            max(0.05, stats.kstwo.isf(level, effective)), rel=1e-6
        )
        assert r.bias_corrected == pytest.approx(r.value - stats.kstwo.mean(effective))
    assert small.result("x1", "ks").min_detectable > 0.2  # 60 rows: only a large D
    assert large.result("x1", "ks").min_detectable == pytest.approx(0.05)  # the floor
    assert abs(large.result("x1", "ks").bias_corrected) < 0.01  # no drift: near 0


def test_the_engine_decides_as_the_bound_the_benchmark_simulates_with(normal_profile):
    level = 1e-3
    for rows in (40, 300):
        bound = decision_bound("kl", normal_profile.features["x0"], rows, 0.0, level)
        for window in windows(rows, 20, rows):
            report = check_drift(
                normal_profile, window, tests=["kl"], thresholds={"kl": 0.0}, levels={"kl": level}
            )
            result = report.result("x0", "kl")
            assert result.drifted == (result.value >= bound.min_detectable)


@pytest.mark.parametrize("test", ["kl", "psi", "js", "ks"])
def test_p_values_are_calibrated_at_5_percent_for_no_drift_windows(normal_profile, test):
    hits = total = 0
    for rows in (30, 300, 3_000):
        for window in windows(rows, 60, 10 + rows):
            report = check_drift(
                normal_profile, window, tests=[test], thresholds={test: 0.0},
                levels={test: 0.05}, effect_size_floor={test: 0.0},
            )  # fmt: skip
            hits += sum(r.drifted for r in report.results)
            total += len(report.results)
    assert abs(hits / total - 0.05) < 3 * math.sqrt(0.05 * 0.95 / total)


def test_nulls_are_cached_and_large_windows_share_a_grid(normal_profile):
    feature = normal_profile.features["x0"]
    assert binned_null("kl", feature, 100) is binned_null("kl", feature, 100)
    assert grid_size(100) == 100 and grid_size(10_000) <= 10_000 < grid_size(10_000) * 1.031


def test_the_planner_warns_when_traffic_cannot_support_the_default_rules(normal_profile):
    gates = load_gate_config()
    kl, missing = gates.monitors
    small = plan_monitor(kl, normal_profile, 30)
    assert small.warnings and "too few for kl 0.1" in small.warnings[0]
    assert small.min_rows and small.min_rows > 30
    assert small.false_alarms_per_month == pytest.approx(0.05, rel=1e-6)
    assert small.old_rule_per_month > 100  # the bare threshold: an alarm most hours
    large = plan_monitor(kl, normal_profile, 5_000)
    assert not large.warnings and large.smallest_shift < small.smallest_shift
    assert plan_monitor(missing, normal_profile, 30).smallest_shift < 0.5


@pytest.fixture(scope="module")
def zipf_levels():
    """A categorical population with many rare levels and a reference drawn from it."""
    rng = np.random.default_rng(3)
    weights = 1.0 / np.arange(1, 301) ** 1.3
    levels = np.array([f"L{j}" for j in range(300)])
    draw = lambda rows: rng.choice(levels, rows, p=weights / weights.sum())  # noqa: E731
    profile = ReferenceProfile.fit(pd.DataFrame({"c": draw(5_000)}), sample_rows=0)
    return profile, draw


@pytest.mark.parametrize("test", ["kl", "psi", "js"])
def test_the_null_computes_a_categorical_statistic_on_the_engines_bins(zipf_levels, test):
    # The engine's bins are the levels seen in the reference or the window: a level
    # absent from both is no bin (neither smoothed nor renormalised over).
    profile, draw = zipf_levels
    reference = profile.features["c"]
    known = list(reference.category_counts)
    ref = np.array(list(reference.category_counts.values()), dtype=float)
    for rows in (50, 20_000):
        window = pd.DataFrame({"c": draw(rows)})
        report = check_drift(profile, window, tests=[test])
        shares = window["c"].value_counts()
        unseen = sorted(set(shares.index) - set(known))
        # Two unseen levels the window does not have: they must change nothing.
        labels = known + unseen + ["absent-1", "absent-2"]
        cur = np.array([shares.get(k, 0) for k in labels], dtype=float)
        p_ref = np.concatenate([ref, np.zeros(len(labels) - ref.size)]) / ref.sum()
        value = binned_statistic(test, p_ref[None], (cur / cur.sum())[None], categorical=True)
        assert value[0] == pytest.approx(report.result("c", test).value, rel=1e-12, abs=1e-15)


def test_a_categorical_null_population_adds_the_levels_the_reference_missed():
    counts = np.array([50.0, 20.0, 10.0, 5.0, 2.0, 2.0, 1.0, 1.0, 1.0, 1.0])
    n, f1, f2 = counts.sum(), 4.0, 2.0
    population = _categorical_population(counts)
    coverage = 1 - f1 / n * ((n - 1) * f1 / ((n - 1) * f1 + 2 * f2))
    unseen = math.ceil((n - 1) / n * f1**2 / (2 * f2))  # Chao1: 4 levels
    assert population.size == counts.size + unseen
    assert population.sum() == pytest.approx(1.0)
    assert population[: counts.size].sum() == pytest.approx(coverage)
    assert np.allclose(population[counts.size :], (1 - coverage) / unseen)
    # Levels seen once are shrunk below 1/n; common levels keep about their share.
    assert population[counts.size - 1] < 1 / n
    assert population[0] == pytest.approx(50 / n, rel=0.01)
    # No level seen once: nothing is missing, the shares are the counts'.
    assert np.allclose(_categorical_population(np.array([3.0, 2.0, 5.0])), [0.3, 0.2, 0.5])


def test_the_engine_decides_a_categorical_feature_as_the_bound(zipf_levels):
    """Small windows: the profile-only bound. From CONDITIONAL_MIN_ROWS rows on: the
    permutation null given the window's counts, the same p-value every time."""
    profile, draw = zipf_levels
    reference = profile.features["c"]
    level = 1e-3
    for rows in (60, 20_000):
        bound = decision_bound("kl", reference, rows, 0.0, level)
        for seed in range(5):
            window = pd.DataFrame({"c": draw(rows)})
            report = check_drift(
                profile, window, tests=["kl"], thresholds={"kl": 0.0}, levels={"kl": level}
            )
            result = report.result("c", "kl")
            if rows < CONDITIONAL_MIN_ROWS:
                assert result.drifted == (result.value >= bound.min_detectable), (rows, seed)
                continue
            summary = summarise_window(profile, window).features["c"]
            ref_counts, cur_counts, _ = bin_counts(reference, summary)
            p_value = conditional_null("kl", ref_counts, cur_counts).p_value(result.value)
            assert result.p_value == p_value and result.drifted == (p_value <= level)
            again = check_drift(
                profile, window, tests=["kl"], thresholds={"kl": 0.0}, levels={"kl": level}
            )
            assert again.result("c", "kl").p_value == result.p_value


def test_the_conditional_null_catches_a_shift_of_the_common_levels(zipf_levels):
    profile, draw = zipf_levels
    window = pd.DataFrame({"c": draw(5_000)})
    window.loc[window.index[:600], "c"] = "L1"  # 12% of the rows moved to one level
    report = check_drift(
        profile, window, tests=["kl"], thresholds={"kl": 0.01}, levels={"kl": 1e-5}
    )
    result = report.result("c", "kl")
    assert result.drifted and result.p_value <= 1e-5
    assert 0 < result.bias_corrected < result.value


def test_the_early_stopped_permutation_decision_is_the_whole_nulls(zipf_levels):
    """conditional_breach (what the calibration benchmarks decide with) stops drawing
    once the p-value is settled over the level: the same answer as the whole null's,
    on windows far from, near and past breaching, at a loose and a strict level."""
    profile, draw = zipf_levels
    reference = profile.features["c"]
    answers = set()
    for rows, moved in ((600, 0), (600, 40), (3_000, 0), (3_000, 150)):
        for seed in range(2):
            window = pd.DataFrame({"c": draw(rows)})
            window.loc[window.index[:moved], "c"] = "L1"  # some rows moved to one level
            summary = summarise_window(profile, window).features["c"]
            ref_counts, cur_counts, _ = bin_counts(reference, summary)
            value = binned_statistic(
                "kl", (ref_counts / ref_counts.sum())[None], (cur_counts / rows)[None],
                categorical=True,
            )[0]  # fmt: skip
            null = conditional_null("kl", ref_counts, cur_counts)
            for level in (0.05, 1e-3):
                whole = null.p_value(value) <= level
                early = conditional_breach("kl", ref_counts, cur_counts, value, level)
                assert early == whole, (rows, moved, seed, level)
                answers.add(whole)
    assert answers == {True, False}  # both branches were exercised
    # Drawn in chunks, the permutations are the one call's, value for value.
    chunked = _permutations("kl", ref_counts, cur_counts)
    values = np.concatenate([chunked(250) for _ in range(8)])
    assert np.array_equal(np.sort(values), null.draws)


def test_the_importance_weights_are_the_mixture_of_every_proposal():
    """_mixture_ratio (summed by the proposals' structure, for speed) against its
    definition, one term per proposal: ``sum_m pi_m c_m^n prod_(j in E_m) f_m^(x_j)``,
    on windows drawn from the proposals themselves, so that many have empty and thin
    tilted bins (the far tail the weights are there for)."""
    rng = np.random.default_rng(12)
    for bins, n in ((10, 30), (10, 100), (6, 40)):
        p = rng.dirichlet(np.full(bins, 3.0))
        subsets, factors, probs, tilted = _proposals(p, n)
        counts, _weights = _tilted_draws(p, n, 400, rng)
        x = counts[:, tilted]
        assert (x == 0).any(axis=1).mean() > 0.3  # empty tilted bins are common here
        scale = (1.0 / (1.0 - (1.0 - factors) * (subsets @ p[tilted]))) ** n
        # f^(x_j) for the bins a proposal scales, 1 for the others (0^0 = 1).
        product = np.power(factors[None, :, None], x[:, None, :] * subsets[None]).prod(axis=2)
        expected = (probs * scale * product).sum(axis=1)
        found = _mixture_ratio(x, p[tilted], n, subsets, factors, probs)
        np.testing.assert_allclose(found, expected, rtol=1e-10)
