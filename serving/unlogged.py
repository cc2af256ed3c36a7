"""The ids of requests this process answered without logging them (``sample_fraction`` < 1).

Which requests are logged is a keyed hash of the request id: the same id always gets
the same answer (a retried request is logged or skipped alike, and a label can be told
unlogged from unknown). So a client that has learnt one id that is not logged (its
answer says ``sampled: false``) could send all of its traffic under that id, and every
copy would be skipped. An id names one request: a logged id used again is a 409, found
in the sample store; for unlogged ids, which are stored nowhere, :class:`UnloggedIds`
is that check, over the newest ``capacity`` ids of this process.
"""

from __future__ import annotations

# 100,000 ids: about 10 MB; at 1,000 requests/s and sample_fraction 0.1, the last
# ~110 s of unlogged ids. An id forgotten after that can be used once more, unlogged.
DEFAULT_CAPACITY = 100_000


class UnloggedIds:
    """The newest ``capacity`` request ids answered unlogged. Used from the event loop
    only (the /predict handler), so it takes no lock."""

    def __init__(self, capacity: int = DEFAULT_CAPACITY) -> None:
        self.capacity = capacity
        self._ids: dict[str, None] = {}  # insertion-ordered: the oldest first

    def claim(self, request_id: str) -> bool:
        """Record ``request_id``; False if it was already recorded (a reused id)."""
        if request_id in self._ids:
            return False
        self._ids[request_id] = None
        if len(self._ids) > self.capacity:
            del self._ids[next(iter(self._ids))]
        return True

    def __len__(self) -> int:
        return len(self._ids)
