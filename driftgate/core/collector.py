"""How often Python's cyclic garbage collector runs in a driftgate command.

A command's first seconds are imports (MLflow, scipy, pandas, torch where it is used):
hundreds of thousands of objects that live as long as the process, which the
collector's default thresholds (a young pass every 700 net container allocations, an
older generation's every 10 of those) walk again and again as they pile up. Measured on
a cold 30-row ``driftgate drift-check`` (fresh processes, interleaved, 2-core machine,
7 December 2026): quiet, 4.70 s of CPU with Python's thresholds, 4.03 s with
(50,000, 50, 100), 3.86 s with no collector at all (4 runs each); at load 5.7, 5.68 s
with Python's, 4.91 s with :data:`COMMAND_THRESHOLDS` (3 runs each). The older
generations keep small multipliers, so a full pass still comes every ten million or so
net allocations: a long command (a streamed window, a retrain) frees its cycles, as it
would not with the collector off, or with (50,000, 50, 100), whose full pass would wait
for about 250 million. The service goes back to Python's thresholds: there a larger
pass is a longer pause inside somebody's request.
"""

from __future__ import annotations

import gc

# Python's own, read before any command changes them.
PYTHON_THRESHOLDS = gc.get_threshold()
# A young pass every 50,000 net allocations (a few megabytes of cycles at most), a
# middle one every 20 of those, a full one every 10 of those (10 million).
COMMAND_THRESHOLDS = (50_000, 20, 10)


def for_a_command() -> None:
    """Fewer, larger collector passes: what a short command's imports need."""
    gc.set_threshold(*COMMAND_THRESHOLDS)


def for_the_service() -> None:
    """Python's default collector thresholds: short pauses inside requests."""
    gc.set_threshold(*PYTHON_THRESHOLDS)
