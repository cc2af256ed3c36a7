"""Moved: monitor rules and their evaluation live in :mod:`driftgate.monitors.rules`.

``gates/`` is the promotion gate; a monitor is a production rule, beside the statistics
it reads. These names stay importable from here for existing callers.
"""

from driftgate.monitors.hysteresis import Firing, apply_hysteresis  # noqa: F401 - re-exported
from driftgate.monitors.results import CONTRACT_PREFIX, MonitorResult  # noqa: F401 - re-exported
from driftgate.monitors.rules import (  # noqa: F401 - re-exported for existing callers
    Monitor,
    drift_tests_of,
    evaluate_monitor,
    group_by_threshold,
)
