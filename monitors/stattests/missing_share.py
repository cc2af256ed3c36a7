"""Change in the share of missing values.

Name: ``missing_share``. Feature types: numeric, categorical. Direction: ``distance``.

Value: ``|missing_cur / rows_cur - missing_ref / rows_ref|``, an absolute change of a
share (0..1); ``details["change"]`` keeps the sign. Missing means NaN / None / NA
(``pd.isna``); infinite values are not missing. This is the statistic that makes a
rising missing share visible, since every other test excludes missing values.
"""

from __future__ import annotations

from driftgate.monitors.stattests.registry import InsufficientData, StatTest, TestOutcome, register


def missing_share_test(reference, current) -> TestOutcome:
    """Absolute change of the missing share between reference and window."""
    if current.rows == 0:
        raise InsufficientData("the current window has no rows")
    if reference.rows == 0:
        raise InsufficientData("the reference has no rows")
    change = current.missing_share - reference.missing_share
    return TestOutcome(
        value=abs(change),
        details={
            "change": change,
            "reference_missing_share": reference.missing_share,
            "current_missing_share": current.missing_share,
        },
    )


register(
    StatTest(
        name="missing_share",
        func=missing_share_test,
        feature_types=("numeric", "categorical"),
        direction="distance",
        units="absolute change of the missing share (0..1)",
        default_threshold=0.05,
    )
)
