"""Records to the model's input matrix, as training encoded its frames.

The model's input is one float32 matrix, a column per feature in spec order
(:mod:`driftgate.training.features`): a number as is, a category as its code (the
index in the spec's ``categories``), a category never seen in training as the
unseen code, and a null as NaN (the model imputes it). This module is that encoding
for JSON records, without building a DataFrame per request: an all-numeric model
(the demo's) keeps the single ``np.array`` call it always had.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from driftgate.training.features import FeatureSpec, category_key


class RecordEncoder:
    """Encodes records for one model version's feature specs."""

    def __init__(self, specs: Sequence[FeatureSpec]) -> None:
        self.specs = tuple(specs)
        self.names = tuple(spec.name for spec in self.specs)
        self._lookups = {
            index: ({c: code for code, c in enumerate(spec.categories)}, spec.unseen_code)
            for index, spec in enumerate(self.specs)
            if spec.kind == "categorical"
        }

    @property
    def categorical(self) -> frozenset[str]:
        return frozenset(self.specs[index].name for index in self._lookups)

    def encode(self, records: Sequence[Mapping[str, Any]]) -> np.ndarray:
        """The float32 matrix of ``records`` (validated: every feature present)."""
        if not self._lookups:
            # None becomes NaN in a float array: the model imputes it.
            return np.array([[r[f] for f in self.names] for r in records], dtype=np.float32)
        matrix = np.empty((len(records), len(self.names)), dtype=np.float32)
        for index, name in enumerate(self.names):
            values = [record[name] for record in records]
            lookup = self._lookups.get(index)
            if lookup is None:
                matrix[:, index] = np.array(values, dtype=np.float64)
                continue
            codes, unseen = lookup
            matrix[:, index] = [
                np.nan if v is None else codes.get(category_key(v), unseen) for v in values
            ]
        return matrix
