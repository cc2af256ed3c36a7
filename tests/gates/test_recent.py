"""promotion.recent: its config and the verdict on the recent slice."""

import numpy as np
import pytest

from driftgate.core.yamlconfig import ConfigError
from driftgate.gates.config import RecentSlice, load_gate_config
from driftgate.gates.recent import CHECK, judge_recent

RNG = np.random.default_rng(3)
LABELS = (RNG.random(200) < 0.35).astype(int)


def _answers(accuracy):
    right = RNG.random(len(LABELS)) < accuracy
    return np.where(np.where(right, LABELS, 1 - LABELS) == 1, 0.9, 0.1)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("promotion:\n  recent: {rows: 0}\n", r"promotion.recent.rows: .*greater than or equal"),
        ("promotion:\n  recent: {rows: 20, min_rows: 50}\n", r"promotion.recent: .*min_rows 50"),
        ("promotion:\n  recent: {confidence: 1.5}\n", r"promotion.recent.confidence"),
        ("promotion:\n  recent: {metric: auc}\n", r"promotion.recent.metric"),
        ("promotion:\n  recent: {window: 30d}\n", r"promotion.recent.window: .*unknown key"),
    ],
)
def test_bad_recent_settings_name_the_key(tmp_path, text, message):
    path = tmp_path / "gates.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=message):
        load_gate_config(path)


def test_a_candidate_worse_on_the_recent_slice_is_refused():
    (result,) = judge_recent(RecentSlice(), "binary", LABELS, _answers(0.6), _answers(0.85), 0.5)
    assert result.name == CHECK and result.failed
    assert "refused whatever the configured split says" in result.message


def test_a_clearly_better_candidate_passes_and_both_figures_are_shown():
    (result,) = judge_recent(RecentSlice(), "binary", LABELS, _answers(0.9), _answers(0.6), 0.5)
    assert (
        result.passed and "vs champion" in result.observed and "200 recent rows" in result.observed
    )


def test_too_few_recent_rows_leave_the_decision_to_the_other_gates():
    (result,) = judge_recent(RecentSlice(min_rows=30), "binary", LABELS[:12], None, None, 0.5)
    assert result.not_applicable and "min_rows 30" in result.message
    (absent,) = judge_recent(RecentSlice(), "binary", None, None, None, 0.5, missing_reason="none")
    assert absent.not_applicable


def test_without_a_champion_the_slice_is_shown_not_compared():
    (result,) = judge_recent(RecentSlice(), "binary", LABELS, _answers(0.9), None, 0.5)
    assert result.passed and result.name == "recent_accuracy"
