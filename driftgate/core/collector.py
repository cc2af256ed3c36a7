"""How often Python's cyclic garbage collector runs in a driftgate command.

A command's first seconds are imports (MLflow, scipy, pandas, torch where it is used):
hundreds of thousands of objects that live as long as the process, which the
collector's default thresholds (a pass every 700 net container allocations, an older
generation's every 10 of those) walk again and again as they pile up. Measured on a
cold 30-row ``driftgate drift-check`` (4 interleaved fresh processes each, quiet 2-core
machine, 7 December 2026): 4.70 s of CPU with the defaults, 4.03 s with
:data:`COMMAND_THRESHOLDS`, 3.86 s with no collector at all. Raised thresholds still
collect every cycle, in fewer and larger passes; switching the collector off was not
taken, since a long command (a streamed window, a retrain) would then never free its
cycles. The service goes back to Python's defaults: there a larger pass is a longer
pause inside somebody's request.
"""

from __future__ import annotations

import gc

# Python's own, read before any command changes them.
PYTHON_THRESHOLDS = gc.get_threshold()
# A young pass every 50,000 net allocations (a few megabytes of cycles at most).
COMMAND_THRESHOLDS = (50_000, 50, 100)


def for_a_command() -> None:
    """Fewer, larger collector passes: what a short command's imports need."""
    gc.set_threshold(*COMMAND_THRESHOLDS)


def for_the_service() -> None:
    """Python's default collector thresholds: short pauses inside requests."""
    gc.set_threshold(*PYTHON_THRESHOLDS)
