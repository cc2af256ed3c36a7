"""Delayed labels: what a true outcome may look like for a model's task.

One rule for every source of labels (``POST /feedback`` and ``driftgate labels load``):

- ``binary``: the integer 0 or 1 (not ``true``/``false``, not ``0.0``: a label that
  needs guessing is refused);
- ``multiclass``: one of the version's class labels (a text, or an integer whose text
  is a class label, as an integer category code is read at /predict);
- ``regression``: a finite number.

A label is kept as its canonical text (``"1"``, ``"setosa"``, ``"3.25"``), so the same
label sent twice compares equal however it was spelled, and as a number (0/1, the class
index, the value) for the performance monitors.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from numbers import Real


@dataclass(frozen=True)
class Label:
    """A checked label: ``text`` is its canonical form, ``value`` the number metrics use."""

    text: str
    value: float


class LabelError(ValueError):
    """Why a label is not one the task can have (the message is for the client)."""


def check_label(task: str, classes: tuple[str, ...], label: object) -> Label:
    """``label`` as a :class:`Label` of ``task``, or LabelError saying what is expected."""
    if task == "multiclass":
        if isinstance(label, bool) or not isinstance(label, (str, int)):
            raise LabelError(f"must be one of the classes {list(classes)}, got {_shown(label)}")
        text = str(label)
        if text not in classes:
            shown = list(classes[:20]) + (["..."] if len(classes) > 20 else [])
            raise LabelError(f"{_shown(label)} is not a class of the model (classes: {shown})")
        return Label(text, float(classes.index(text)))
    if task == "regression":
        if isinstance(label, bool) or not isinstance(label, Real):
            raise LabelError(f"must be a number, got {_shown(label)}")
        value = float(label)
        if not math.isfinite(value):
            raise LabelError("must be a finite number")
        return Label(repr(value), value)
    # binary (also versions logged before tasks)
    if isinstance(label, bool) or not isinstance(label, int) or label not in (0, 1):
        raise LabelError(f"must be the integer 0 or 1, got {_shown(label)}")
    return Label(str(int(label)), float(label))


def _shown(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
