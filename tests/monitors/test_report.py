"""The Evidently HTML report renders from a profile's reference sample."""

from __future__ import annotations

import pandas as pd
import pytest

from driftgate.monitors import ProfileError, ReferenceProfile
from driftgate.monitors.report import render_evidently_report


def test_report_is_written(rng, tmp_path):
    reference = pd.DataFrame({"x": rng.normal(size=500), "c": rng.choice(["a", "b"], 500)})
    profile = ReferenceProfile.fit(reference, sample_rows=200)
    loaded = ReferenceProfile.load(profile.save(tmp_path / "profile"))
    current = reference.assign(x=reference.x + 1, extra=0)
    path = render_evidently_report(loaded, current, tmp_path / "report.html", max_current_rows=300)
    text = path.read_text()
    assert path.stat().st_size > 10_000 and "<html" in text.lower()


def test_report_needs_a_reference_sample(rng, tmp_path):
    profile = ReferenceProfile.fit(pd.DataFrame({"x": [1.0, 2.0]}), sample_rows=0)
    with pytest.raises(ProfileError, match="reference sample"):
        render_evidently_report(profile, pd.DataFrame({"x": [1.0]}), tmp_path / "r.html")
