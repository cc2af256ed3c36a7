"""Rejected traffic: the records a 422 refuses, turned into rows for the sample store.

A refused record is stored (never scored) so the drift check sees what the contract
keeps out: the ``rejected_share`` monitor counts it and drift on ``population: all``
includes it. Two bounds keep junk from filling the disk: each row holds only the
model's features (a number that parses as one, else NaN; a category's text) and the
first broken field's raw value as text cut to ``MAX_RAW_VALUE_CHARS``; and
:class:`RejectedBudget` stores at most ``serving.rejected_max_bytes_per_minute`` bytes
(each row measured as stored: :func:`~driftgate.stores.samples.rejected_row_bytes`)
and ``serving.rejected_max_per_minute`` records per minute in this process, counting
the rest (:class:`~driftgate.stores.samples.RejectedOverflow` rows in the store,
``driftgate_rejected_overflow_records`` on ``/metrics``). Bytes, not rows, are what
fill a disk: a row holds up to 32 broken fields' names, so rows of 0.8 KB and of 5 KB
both occur, and a row cap alone let a flood of large ones cost 10x its bound.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping, Sequence
from datetime import datetime

from driftgate.serving.validation import FieldError
from driftgate.stores.samples import (
    RejectedOverflow,
    RejectedSample,
    clean_rejected_features,
    minute_of,
    raw_text,
    rejected_row_bytes,
)

# The reason of a valid record in a refused request.
OTHER_RECORD = (FieldError("", "another record of the request is refused", "request.other_record"),)


class RejectedBudget:
    """At most ``per_minute`` rejected records and ``bytes_per_minute`` bytes of them
    stored per wall-clock minute.

    Thread-safe; :meth:`take` grants part or all of a request's records and keeps count
    of the rest, which :meth:`drain_overflow` hands out (once) for the store.
    """

    def __init__(
        self, per_minute: int, bytes_per_minute: int | None = None, clock=time.monotonic
    ) -> None:
        self.per_minute = per_minute
        self.bytes_per_minute = bytes_per_minute
        self._clock = clock
        self._lock = threading.Lock()
        self._minute = -1
        self._used = 0
        self._used_bytes = 0
        self._overflow: dict[int, int] = {}
        self.dropped = 0  # every record refused by the cap since start

    def take(self, sizes: Sequence[int], event_minute: int) -> int:
        """How many of a request's records (``sizes``: each one's stored bytes, in
        order) may be stored now: the longest prefix within both caps. The rest are
        counted against ``event_minute``, the minute of event time they belong to."""
        wanted = len(sizes)
        with self._lock:
            minute = int(self._clock() // 60)
            if minute != self._minute:
                self._minute, self._used, self._used_bytes = minute, 0, 0
            granted = max(0, min(wanted, self.per_minute - self._used))
            if self.bytes_per_minute is not None:
                room, fits = self.bytes_per_minute - self._used_bytes, 0
                while fits < granted and sizes[fits] <= room:
                    room -= sizes[fits]
                    fits += 1
                granted = fits
            self._used += granted
            self._used_bytes += sum(sizes[:granted])
            if wanted > granted:
                self._overflow[event_minute] = self._overflow.get(event_minute, 0) + (
                    wanted - granted
                )
                self.dropped += wanted - granted
            return granted

    def drain_overflow(self) -> dict[int, int]:
        """The overflow counted since the last drain (minute -> records), and reset."""
        with self._lock:
            counts, self._overflow = self._overflow, {}
            return counts

    def restore(self, counts: Mapping[int, int]) -> None:
        """Put back counts whose commit failed (they are tried again with the next)."""
        with self._lock:
            for minute, count in counts.items():
                self._overflow[minute] = self._overflow.get(minute, 0) + count


def rejected_samples(
    model,
    records: Sequence[Mapping],
    broken: Mapping[int, Sequence[FieldError]],
    *,
    request_id: str,
    timestamp: datetime,
    received: datetime,
    sample_fraction: float,
    limit: int,
    client: str | None = None,
) -> list[RejectedSample]:
    """Rows for the first ``limit`` records of a refused request (``broken``: record
    index -> its broken fields; the request's other records are stored as
    ``request.other_record``)."""
    specs = getattr(model, "specs", ()) or ()
    categorical = [s.name for s in specs if getattr(s, "kind", "numeric") == "categorical"]
    numeric = [name for name in model.features if name not in categorical]
    rows = []
    # The valid records of a refused request were refused too (a 422 scores nothing):
    # they are traffic, stored under their own rule, which no per-rule monitor counts.
    for index in range(min(limit, len(records))):
        errors = broken.get(index) or OTHER_RECORD
        record = records[index]
        first = errors[0]
        rows.append(
            RejectedSample(
                timestamp=timestamp,
                received_at=received,
                request_id=request_id,
                record_index=index,
                model_name=model.name,
                model_version=model.version,
                features=clean_rejected_features(record, numeric, categorical),
                rule=first.rule or "unknown",
                field=str(first.field),
                raw_value=raw_text(record[first.field]) if first.field in record else None,
                reasons=tuple((str(e.field), e.rule or "unknown") for e in errors),
                sample_fraction=sample_fraction,
                client=client,
            )
        )
    return rows


def overflow_item(request_id: str, counts: Mapping[int, int]) -> RejectedOverflow:
    return RejectedOverflow(request_id=request_id, counts=dict(counts))


__all__ = ["RejectedBudget", "minute_of", "overflow_item", "rejected_row_bytes", "rejected_samples"]
