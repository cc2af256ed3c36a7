"""registry.with_paragraph: the labelled paragraphs of a model version's description."""

from driftgate.registry import DESCRIPTION_MAX_CHARS, with_paragraph

TRAINING = "TabularClassifier [32, 16] on 7000 training days (data digest abc)."


def test_a_new_label_is_appended_below_the_training_summary():
    text = with_paragraph(TRAINING, "Gate", "passed.")
    assert text == f"{TRAINING}\n\n**Gate:** passed."
    assert with_paragraph(None, "Gate", "passed.") == "**Gate:** passed."


def test_a_label_written_again_is_replaced_in_place_not_stacked():
    text = with_paragraph(with_paragraph(TRAINING, "Gate", "failed."), "Promotion", "promoted.")
    again = with_paragraph(text, "Gate", "passed.")
    assert again == f"{TRAINING}\n\n**Gate:** passed.\n\n**Promotion:** promoted."


def test_a_long_paragraph_is_cut_to_fit_the_stores_column():
    text = with_paragraph(TRAINING, "Gate", "x" * 10_000)
    assert len(text) == DESCRIPTION_MAX_CHARS
    assert text.startswith(TRAINING) and text.endswith("x…")
