"""Whether a window's performance estimate can be trusted: the check of its assumption.

Every estimate (CBPE's calibrated confidences, DLE's loss model) is learnt on the
reference and assumes the window is like it where it matters: records in a region the
reference never showed get an extrapolated confidence or loss, and a shift that moves
many records there is exactly when an estimate is optimistic (issue 31: California
housing under a geographic shift, estimated accuracy 0.14 above realized). The check:
the share of the window's records outside the reference's **support**, a record being
outside when any of its features (and its output value) lies beyond the reference's
range (numbers: below its minimum or above its maximum; categories: a level it never
held). On no-drift windows a record is outside a number's range by chance with
``2 / (n + 1)`` (the reference's ``n`` values hold the extremes), so over ``k``
numbers a share ``1 - (1 - 2/(n + 1))^k`` is chance (1.6% for 16 columns on 2,000
rows; 12.5% for 10 columns on 150); a share more than :data:`MAX_OUTSIDE_SHARE` above
that is a shift, and the estimate is reported unreliable, with the columns most
outside, instead of as a number.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from driftgate.monitors.estimates.calibration import VALUE_COLUMN, OutputsError

# The share of a window's records outside the reference's support, beyond the share
# that is chance, above which its estimate is reported unreliable: 10% of records
# extrapolated moves an estimate by up to a tenth of the metric's range, more than the
# thresholds monitors set (0.02-0.05).
MAX_OUTSIDE_SHARE = 0.10
# Levels kept per categorical column (beyond them the column's support is unchecked:
# an identifier-like column says nothing about the estimate's assumption).
MAX_SUPPORT_LEVELS = 1000


@dataclass(frozen=True)
class Support:
    """The reference's range per numeric column and levels per categorical one."""

    ranges: dict[str, tuple[float, float]]
    levels: dict[str, list[str]]
    rows: int = 0  # the reference's rows: how often its range is left by chance

    @property
    def chance_share(self) -> float:
        """The share of no-drift records outside some numeric range by chance."""
        if not self.ranges or self.rows < 1:
            return 0.0
        return 1.0 - (1.0 - 2.0 / (self.rows + 1)) ** len(self.ranges)

    @property
    def limit(self) -> float:
        """The outside share above which a window's estimate is unreliable."""
        return min(self.chance_share + MAX_OUTSIDE_SHARE, 1.0)

    @classmethod
    def fit(cls, frame: pd.DataFrame) -> Support:
        ranges, levels = {}, {}
        for column in frame.columns:
            values = frame[column]
            if pd.api.types.is_bool_dtype(values):
                continue  # two levels, nothing to extrapolate; stored as text or bool
            if pd.api.types.is_numeric_dtype(values):
                numbers = pd.to_numeric(values, errors="coerce").dropna()
                if len(numbers):
                    ranges[str(column)] = (float(numbers.min()), float(numbers.max()))
            else:
                seen = values.dropna().astype(str).unique()
                if len(seen) <= MAX_SUPPORT_LEVELS:
                    levels[str(column)] = sorted(seen.tolist())
        return cls(ranges, levels, len(frame))

    def outside(self, frame: pd.DataFrame) -> dict[str, np.ndarray]:
        """Column -> which records lie outside its support (a missing value does not:
        the contract judges missing values; a column the window lacks is skipped)."""
        masks = {}
        for column, (low, high) in self.ranges.items():
            if column in frame:
                numbers = pd.to_numeric(frame[column], errors="coerce").to_numpy(np.float64)
                masks[column] = (numbers < low) | (numbers > high)
        for column, levels in self.levels.items():
            if column in frame:
                values = frame[column]
                unseen = ~values.astype(str).isin(levels).to_numpy()
                masks[column] = unseen & values.notna().to_numpy()
        return masks

    def check(self, frame: pd.DataFrame) -> dict[str, Any]:
        """``reliable``, the ``outside_share`` of records, the ``columns`` most outside
        (share per column, largest first, at most five) and the ``reason`` when not."""
        masks = self.outside(frame)
        rows = len(frame)
        if not masks or not rows:
            return {"reliable": True, "outside_share": 0.0, "columns": {}, "checked": len(masks)}
        outside = np.logical_or.reduce(list(masks.values()))
        share = float(outside.mean())
        by_column = sorted(
            ((float(m.mean()), c) for c, m in masks.items() if m.any()), reverse=True
        )
        columns = {c: s for s, c in by_column[:5]}
        result = {
            "reliable": share <= self.limit,
            "outside_share": share,
            "columns": columns,
            "checked": len(masks),
        }
        if not result["reliable"]:
            named = ", ".join(f"{c} {s:.0%}" for c, s in columns.items())
            result["reason"] = (
                f"{share:.0%} of the window's {rows} records lie outside the reference's "
                f"support (above {self.limit:.0%}; {named}): the estimate "
                "extrapolates what it learnt on the reference there"
            )
        return result

    def to_json(self) -> dict[str, Any]:
        return {
            "method": "range",
            "ranges": {c: list(r) for c, r in self.ranges.items()},
            "levels": self.levels,
            "rows": self.rows,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Support:
        if data.get("method") != "range":
            raise OutputsError(f"unknown support method {data.get('method')!r}")
        ranges = {c: (float(r[0]), float(r[1])) for c, r in data["ranges"].items()}
        levels = {c: [str(v) for v in values] for c, values in data["levels"].items()}
        return cls(ranges, levels, int(data.get("rows", 0)))


def support_columns(outputs_frame: pd.DataFrame) -> list[str]:
    """The output columns whose support is checked: the value (a classifier's
    confidence or a regression's prediction); the class is judged by prediction drift."""
    return [VALUE_COLUMN] if VALUE_COLUMN in outputs_frame else []
