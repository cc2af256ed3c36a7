"""The service's view of the durable pause switch (:class:`driftgate.stores.ControlStore`).

The switch can be flipped by another process (the drift-check flow, ``driftgate
pause``/``resume``), so the service re-reads it every ``poll_seconds`` in a background
thread and prediction requests read the cached value: no database round trip on the
hot path. A pause made elsewhere therefore takes effect within ``poll_seconds``; one
made through this service's admin endpoint takes effect at once. With
``poll_seconds=0`` every request reads the store.

If the store cannot be read, the last known position is kept (and ``/readyz`` reports
the store as unreachable): a flaky database neither pauses nor resumes inference.
A store that is *gone* is another matter: the switch is the one at the store's URL,
the one ``driftgate pause`` writes. If that file was replaced (or the database
re-created), the view reopens the store and reads the new switch; if it was deleted
and not re-created, the switch is unknown and :attr:`PauseSwitchView.unknown` says
why: the service refuses predictions until the store is back.
The service starts in the stored position — it reads the switch before it accepts
its first request — which is what makes a pause survive a restart.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from driftgate.serving.errors import describe_error, new_error_id
from driftgate.stores.control import ControlStore, PauseState

log = logging.getLogger(__name__)


class PauseSwitchView:
    """Cached pause state of one model, refreshed from the control store."""

    def __init__(
        self,
        store: ControlStore,
        model_name: str,
        poll_seconds: float,
        on_change: Callable[[PauseState], None] | None = None,
    ) -> None:
        self.store = store
        self.model_name = model_name
        self.poll_seconds = poll_seconds
        self.on_change = on_change or (lambda state: None)
        self.last_error: str | None = None
        self.unknown: str | None = None
        self._state = PauseState(model_name=model_name)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def refresh(self) -> PauseState:
        """Read the switch now; on failure keep (and return) the last known state."""
        try:
            self.unknown = self.store.follow_replacement()
            if self.unknown:
                raise RuntimeError(self.unknown)
            state = self.store.state(self.model_name)
        except Exception as exc:
            if self.unknown:
                self.last_error = f"cannot read the pause switch: {self.unknown}"
                log.warning("%s", self.last_error)
            else:
                error_id = new_error_id()
                self.last_error = f"cannot read the pause switch (error id {error_id})"
                log.warning("%s: %s", self.last_error, describe_error(exc))
            return self._state
        self.last_error = None
        self.set(state)
        return state

    def set(self, state: PauseState) -> None:
        previous, self._state = self._state, state
        if previous.paused != state.paused:
            shown = state.shown()  # a state stored before the switch's rules: escaped here
            log.warning(
                "inference %s: %s (by %s)",
                "PAUSED" if state.paused else "resumed",
                shown.reason,
                shown.actor,
            )
            self.on_change(state)

    def current(self) -> PauseState:
        """The switch as the service applies it to the next request."""
        if self.poll_seconds == 0:
            return self.refresh()
        return self._state

    def start(self) -> None:
        self.refresh()
        if self.poll_seconds > 0:
            self._thread = threading.Thread(target=self._run, name="pause-switch", daemon=True)
            self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.poll_seconds):
            self.refresh()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
