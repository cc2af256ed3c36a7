"""Evidence across windows: each check also tests the pooled last ``k`` windows.

A monitor that says ``evidence: {scales: [1, 3, 12, 24]}`` is judged, at every check, on
its window alone (scale 1, the decision it had before) and on the union of its last 3,
12 and 24 windows (this one and the ones before it), each against the statistic's own
no-drift distribution at the pooled size (:mod:`monitors.nulls`). It breaches when any
scale does. The false-alarm budget is split equally over the scales
(:func:`monitors.budget.per_scale_check_budgets`): ``P(false fire per horizon) <=
rate`` whatever the dependence between overlapping pools.

Why pooled tests at a few scales rather than a CUSUM or an e-process: a small shift
that persists is detected when the pool is large enough for the statistic's noise to
fall below the shift, and a pool of ``k`` windows is exactly a window ``k`` times
longer, so each scale reuses the calibrated nulls, the threshold (effect-size floor)
and the report of a single window; a few geometric scales lose at most a factor ``S``
of level (the critical value grows like ``log S``), where an e-process pays for not
knowing the alternative and would need a likelihood ratio per statistic. And nothing
is carried from check to check: the pool is read again from the sample store, so a
restart or a catch-up run judges a window exactly as an uninterrupted one would.

This module holds the configuration and the plain functions; the pooled counts come
through a port (:attr:`monitors.kinds.WindowEvidence.pooled`) that the drift check
fills from the sample store.
"""

from __future__ import annotations

from itertools import pairwise

from pydantic import Field, field_validator

from driftgate.core.yamlconfig import StrictModel

# The window alone: today's decision, readable on its own.
WINDOW_ONLY = (1,)
# A year of hourly windows: more than that in one pool is a reference refit, not a check.
MAX_SCALE = 8_784


class Evidence(StrictModel):
    """``evidence:`` of a drift monitor (its statistic, or ``missing_share``)."""

    scales: list[int] = Field(
        default_factory=lambda: list(WINDOW_ONLY),
        description="windows pooled per test, ascending, starting at 1 (the window alone): "
        "[1, 3, 12, 24] also tests the last 3, 12 and 24 windows at every check, with the "
        "false-alarm budget split over the scales",
    )

    @field_validator("scales")
    @classmethod
    def _scales_start_at_the_window(cls, scales: list[int]) -> list[int]:
        if not scales or scales[0] != 1:
            raise ValueError(
                f"scales must start with 1 (the window alone, whose decision every report "
                f"shows), got {scales}"
            )
        if any(b <= a for a, b in pairwise(scales)):
            raise ValueError(f"scales must be strictly increasing, got {scales}")
        if scales[-1] > MAX_SCALE:
            raise ValueError(f"scales: at most {MAX_SCALE} windows in one pool, got {scales[-1]}")
        return scales

    @property
    def pooled(self) -> bool:
        """Whether any scale pools more than the window."""
        return len(self.scales) > 1


def span_text(windows: int, rows: int) -> str:
    """Where the evidence was found, as the report says it."""
    if windows == 1:
        return f"in this window, {rows:,} rows"
    return f"over the last {windows} windows, {rows:,} rows"
