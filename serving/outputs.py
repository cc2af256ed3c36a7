"""The model's output as the answer and the samples, per task.

* ``binary`` (today's shape): ``probabilities`` P(class 1) per record and ``classes``
  0/1 at ``serving.decision_threshold``;
* ``multiclass``: ``probabilities`` one object per record mapping each class label to
  its probability, ``classes`` the most probable label per record, and ``labels`` the
  version's classes in output order;
* ``regression``: ``predictions``, the value per record.

The samples store ``prediction`` (P(class 1) / the top class's probability / the
value), ``predicted_class`` (0/1 / the class index / -1) and ``predicted_label`` (the
multiclass label).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Scored:
    """One request's outputs: the answer's fields and one stored value per record."""

    fields: dict
    prediction: np.ndarray  # float per record
    predicted_class: np.ndarray  # int per record
    predicted_label: list[str | None]


def expected_shape(task: str, rows: int, n_classes: int) -> tuple[int, ...]:
    return (rows, n_classes) if task == "multiclass" else (rows,)


def usable(outputs: np.ndarray, task: str, rows: int, n_classes: int) -> bool:
    return outputs.shape == expected_shape(task, rows, n_classes) and bool(
        np.isfinite(outputs).all()
    )


def score(outputs: np.ndarray, task: str, classes: tuple[str, ...], threshold: float) -> Scored:
    """The answer's fields and the samples' outputs of usable ``outputs``."""
    rows = len(outputs)
    if task == "multiclass":
        index = outputs.argmax(axis=1)
        labels = [classes[i] for i in index]
        return Scored(
            fields={
                "probabilities": [dict(zip(classes, row, strict=True)) for row in outputs.tolist()],
                "classes": labels,
                "labels": list(classes),
            },
            prediction=outputs[np.arange(rows), index],
            predicted_class=index.astype(int),
            predicted_label=labels,
        )
    if task == "regression":
        return Scored(
            fields={"predictions": outputs.tolist()},
            prediction=outputs,
            predicted_class=np.full(rows, -1),
            predicted_label=[None] * rows,
        )
    predicted = (outputs >= threshold).astype(int)
    return Scored(
        fields={"probabilities": outputs.tolist(), "classes": predicted.tolist()},
        prediction=outputs,
        predicted_class=predicted,
        predicted_label=[None] * rows,
    )
