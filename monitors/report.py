"""A human-readable Evidently HTML report of a window, for people.

The decision of a drift check comes from :func:`monitors.drift.check_drift`; this
report is the picture people look at. Evidently needs reference *rows*, which the
profile does not keep in full: it uses the profile's bounded reference sample
(``reference_sample.parquet``, ``sample_rows`` rows at fit time). The current window
is sampled to at most ``max_current_rows`` rows so the report stays quick to build and
light to open; Evidently's numbers can therefore differ from driftgate's (see
``docs/monitors.md``). Evidently is imported only when a report is rendered.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from driftgate.monitors.profile import ProfileError, ReferenceProfile

DEFAULT_MAX_CURRENT_ROWS = 50_000


def render_evidently_report(
    profile: ReferenceProfile,
    current: pd.DataFrame,
    path: str | Path,
    *,
    max_current_rows: int = DEFAULT_MAX_CURRENT_ROWS,
    seed: int = 0,
) -> Path:
    """Write an Evidently ``DataDriftPreset`` HTML report of ``current`` to ``path``.

    Args:
        profile: The reference profile; its reference sample is the report's reference.
        current: The window as one DataFrame (profiled columns are used).
        path: Output ``.html`` file.
        max_current_rows: Larger windows are randomly sampled down to this many rows.
        seed: Seed of that sample.

    Returns:
        The written path.

    Raises:
        ProfileError: The profile was fitted without a reference sample.
    """
    from evidently import Report
    from evidently.presets import DataDriftPreset

    if profile.reference_sample is None or profile.reference_sample.empty:
        raise ProfileError("the profile has no reference sample (fit with sample_rows > 0)")
    columns = list(profile.features)
    window = current[columns]
    if len(window) > max_current_rows:
        window = window.sample(n=max_current_rows, random_state=seed)
    snapshot = Report([DataDriftPreset()]).run(
        current_data=window.reset_index(drop=True), reference_data=profile.reference_sample
    )
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    snapshot.save_html(str(out))
    return out
