"""Helpers for the monitors tests: small profiles and windows built from arrays."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from driftgate.monitors.profile import ReferenceProfile
from driftgate.monitors.window import summarise_window


def fit(reference, kind: str = "numeric", **kwargs) -> ReferenceProfile:
    """A one-feature profile called ``x``."""
    frame = pd.DataFrame({"x": reference})
    return ReferenceProfile.fit(frame, {"x": kind}, sample_rows=0, **kwargs)


def window_of(profile: ReferenceProfile, current, chunk_rows: int | None = None):
    """The ``x`` feature's window counts, one-shot or in chunks of ``chunk_rows``."""
    frame = pd.DataFrame({"x": current})
    if chunk_rows is None:
        return summarise_window(profile, frame).features["x"]
    chunks = (frame.iloc[i : i + chunk_rows] for i in range(0, len(frame), chunk_rows))
    return summarise_window(profile, chunks).features["x"]


def run(test_func, reference, current, kind: str = "numeric", **kwargs):
    """Outcome of one statistic on arrays ``reference`` and ``current``."""
    profile = fit(reference, kind, **kwargs)
    return test_func(profile.features["x"], window_of(profile, current))


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(20261202)
