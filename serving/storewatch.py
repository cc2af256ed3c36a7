"""Whether the stores can take a write right now, known without a probe per request.

A background thread asks each store for its write problem (read-only, a read-only
write-ahead log, a full disk, locked by another process, deleted or replaced,
unreachable; see :func:`driftgate.stores._sql.write_problem`, which commits one probe
row on a new connection, since only a commit meets a full disk and a pooled
connection may not see what a new one would) every ``interval`` seconds and caches
the answer. ``/readyz`` reports the cached problems;
``/predict`` refuses at once while the sample store has one, instead of queueing
requests behind a store that cannot commit them. A problem that clears is noticed
within ``interval``, and the service serves again without a restart.
"""

from __future__ import annotations

import logging
import threading

from driftgate.serving.errors import describe_error, new_error_id
from driftgate.stores.control import ControlStore
from driftgate.stores.samples import SqlSampleStore

log = logging.getLogger(__name__)

CHECK_SECONDS = 1.0


class StoreWatch:
    """Cached write problems of the sample and control stores."""

    def __init__(
        self, samples: SqlSampleStore, control: ControlStore, interval: float = CHECK_SECONDS
    ) -> None:
        self.samples = samples
        self.control = control
        self.interval = interval
        self.sample_problem: str | None = None
        self.control_problem: str | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="store-watch", daemon=True)

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    def problems(self) -> list[str]:
        return [
            f"{name} cannot take writes: {problem}"
            for name, problem in (
                ("sample store", self.sample_problem),
                ("control store", self.control_problem),
            )
            if problem
        ]

    def check(self) -> None:
        sample_problem = _probe("sample store", self.samples.write_problem)
        control_problem = _probe("control store", self.control.write_problem)
        for name, before, now in (
            ("sample store", self.sample_problem, sample_problem),
            ("control store", self.control_problem, control_problem),
        ):
            if before != now:
                if now:
                    log.error("%s cannot take writes: %s", name, now)
                else:
                    log.warning("%s takes writes again", name)
        self.sample_problem, self.control_problem = sample_problem, control_problem

    def start(self) -> None:
        self.check()
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=10)

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self.check()
            except Exception:  # the watch must outlive any one failed check
                log.exception("store check failed")


def _probe(name: str, probe) -> str | None:
    try:
        return probe()
    except Exception as exc:
        error_id = new_error_id()
        log.error("%s check failed (error id %s): %s", name, error_id, describe_error(exc))
        return f"it cannot be checked (error id {error_id})"
