"""The paired sign-flip test of the recent-slice rules: its level and its power, on
simulated slices (the full table: benchmarks/recent_slice_bench.py)."""

import numpy as np
import pytest

from driftgate.gates.paired import compare_paired, constant_outputs, row_losses


def _errors(rng, rows, better, base=0.65, disagree=0.3):
    fixes, breaks = (disagree + better) / 2, (disagree - better) / 2
    draw = rng.random(rows)
    both = base - breaks
    champion_right = draw < both + breaks
    candidate_right = (draw < both) | ((draw >= both + breaks) & (draw < both + breaks + fixes))
    return (~candidate_right).astype(float), (~champion_right).astype(float)


def _promoted(rows, better, trials=300):
    rng = np.random.default_rng(rows)
    hits = 0
    for trial in range(trials):
        candidate, champion = _errors(rng, rows, better)
        hits += compare_paired(candidate, champion, 0.95, flips=400, seed=trial).better
    return hits / trials


@pytest.mark.parametrize("rows", [30, 300])
def test_a_candidate_no_better_than_the_champion_is_rarely_promoted(rows):
    # 5% promised; 300 trials put a true 5% under 9% with room to spare.
    assert _promoted(rows, 0.0) <= 0.09


def test_a_truly_better_candidate_is_promoted_on_a_few_hundred_rows():
    assert _promoted(300, 0.10) >= 0.9


def test_thirty_lucky_rows_do_not_promote_but_a_clear_win_does():
    # 4 rows fixed, 1 broken, 25 the same: +10% accuracy on 30 rows is luck (p ~ 0.19).
    candidate = np.array([0] * 4 + [1] + [0] * 25, float)
    champion = np.array([1] * 4 + [0] + [0] * 25, float)
    lucky = compare_paired(candidate, champion, 0.95)
    assert lucky.improvement == pytest.approx(0.1) and not lucky.better
    clear = compare_paired(np.zeros(30), np.r_[np.ones(10), np.zeros(20)], 0.95)
    assert clear.better and clear.p_value < 0.01


def test_identical_models_are_not_better_and_the_verdict_is_seeded():
    same = np.r_[np.ones(10), np.zeros(40)]
    assert not compare_paired(same, same, 0.95).better
    rng = np.random.default_rng(1)
    a, b = rng.random(100), rng.random(100)
    assert compare_paired(a, b, 0.95).p_value == compare_paired(a, b, 0.95).p_value


def test_row_losses_average_to_the_metric():
    targets = np.array([0, 1, 1, 0])
    p1 = np.array([0.2, 0.7, 0.4, 0.6])
    assert row_losses("binary", "accuracy", targets, p1, 0.5).mean() == 0.5
    log = row_losses("binary", "log_loss", targets, p1, 0.5)
    assert log == pytest.approx(-np.log([0.8, 0.7, 0.4, 0.4]))
    values = np.array([1.0, 2.0, 4.0])
    assert row_losses("regression", "rmse", values, np.zeros(3), 0.5).mean() == 7.0
    probs = np.array([[0.7, 0.2, 0.1], [0.1, 0.1, 0.8]])
    assert list(row_losses("multiclass", "accuracy", np.array([0, 1]), probs, 0.5)) == [0, 1]


def test_the_constant_answer_is_the_prior_the_majority_or_the_mean():
    assert constant_outputs("binary", np.array([0, 0, 0, 1]), 2, 2).tolist() == [0.25, 0.25]
    shares = constant_outputs("multiclass", np.array([2, 2, 0]), 3, 1)
    assert shares.argmax() == 2
    assert constant_outputs("regression", np.array([1.0, 3.0]), 1, 1).tolist() == [2.0]
