"""Reviews opened by monitors.

A review asks a person to look at a breach. There is at most one *open* review per
model version and monitor: a repeated breach updates it (breach count, latest window,
observed value, evidence) instead of opening another, and the same window reported
twice changes nothing, so re-running a drift check is idempotent. Resolving closes it;
the next breach opens a new one.

The monitors' hysteresis state and the ledger of windows acted on are in
:mod:`driftgate.stores.monitor_state` (same database, their own store).

Same databases as the control store: SQLite by default, PostgreSQL by URL.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from datetime import datetime

from sqlalchemy import (
    BigInteger,
    Column,
    Float,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    and_,
    insert,
    select,
    text,
    update,
)

from driftgate.stores._sql import (
    StoreError,
    TableStore,
    write_transaction,
)
from driftgate.stores._time import iso_of_us, now_us, to_us

REVIEWS_TABLE = "driftgate_reviews"
OPEN, RESOLVED = "open", "resolved"

_metadata = MetaData()
reviews_table = Table(
    REVIEWS_TABLE,
    _metadata,
    Column("id", String(64), primary_key=True),
    Column("model_name", String(256), nullable=False),
    Column("model_version", String(64), nullable=False),
    Column("monitor", String(256), nullable=False),
    Column("metric", String(256), nullable=False),
    Column("status", String(16), nullable=False),
    Column("opened_at_us", BigInteger, nullable=False),
    Column("updated_at_us", BigInteger, nullable=False),
    Column("breaches", Integer, nullable=False),
    Column("first_window_start_us", BigInteger),
    Column("first_window_end_us", BigInteger),
    Column("last_window_start_us", BigInteger),
    Column("last_window_end_us", BigInteger),
    Column("observed", Float),
    Column("threshold", Float, nullable=False),
    Column("features", Text),  # JSON list
    Column("evidence", Text),  # JSON list of links
    Column("resolved_at_us", BigInteger),
    Column("resolved_by", String(256)),
    Column("resolution", Text),
    # One open review per model version and monitor, enforced by the database too.
    Index(
        f"ux_{REVIEWS_TABLE}_open",
        "model_name",
        "model_version",
        "monitor",
        unique=True,
        sqlite_where=text("status = 'open'"),
        postgresql_where=text("status = 'open'"),
    ),
)


@dataclass(frozen=True)
class Review:
    id: str
    model_name: str
    model_version: str
    monitor: str
    metric: str
    status: str
    opened_at: str
    updated_at: str
    breaches: int
    first_window: tuple[str | None, str | None]
    last_window: tuple[str | None, str | None]
    observed: float | None
    threshold: float
    features: list[str]
    evidence: list[str]
    resolved_at: str | None = None
    resolved_by: str | None = None
    resolution: str | None = None

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class ReviewChange:
    """``created``: a new review; ``updated``: an open one took a new window."""

    review: Review
    created: bool
    updated: bool


def _review(row) -> Review:
    return Review(
        id=row["id"],
        model_name=row["model_name"],
        model_version=row["model_version"],
        monitor=row["monitor"],
        metric=row["metric"],
        status=row["status"],
        opened_at=iso_of_us(row["opened_at_us"]),
        updated_at=iso_of_us(row["updated_at_us"]),
        breaches=row["breaches"],
        first_window=(
            iso_of_us(row["first_window_start_us"]),
            iso_of_us(row["first_window_end_us"]),
        ),
        last_window=(iso_of_us(row["last_window_start_us"]), iso_of_us(row["last_window_end_us"])),
        observed=row["observed"],
        threshold=row["threshold"],
        features=json.loads(row["features"] or "[]"),
        evidence=json.loads(row["evidence"] or "[]"),
        resolved_at=iso_of_us(row["resolved_at_us"]),
        resolved_by=row["resolved_by"],
        resolution=row["resolution"],
    )


def _row(connection, review_id: str):
    row = (
        connection.execute(select(reviews_table).where(reviews_table.c.id == review_id))
        .mappings()
        .first()
    )
    if row is None:
        raise StoreError(f"no review with id '{review_id}'")
    return row


class ReviewStore(TableStore):
    """Reviews in SQLite (default) or PostgreSQL."""

    metadata, label = _metadata, "review"

    # -- reviews -----------------------------------------------------------------
    def open_or_update(
        self,
        *,
        model_name: str,
        model_version: str,
        monitor: str,
        metric: str,
        window_start: datetime | str,
        window_end: datetime | str,
        observed: float | None,
        threshold: float,
        features: Sequence[str] = (),
        evidence: Sequence[str] = (),
    ) -> ReviewChange:
        """Open a review for this breach, or update the open one of the same monitor."""
        start, end, now = to_us(window_start), to_us(window_end), now_us()
        key = and_(
            reviews_table.c.model_name == model_name,
            reviews_table.c.model_version == model_version,
            reviews_table.c.monitor == monitor,
            reviews_table.c.status == OPEN,
        )
        with write_transaction(self.engine) as connection:
            query = select(reviews_table).where(key)
            if connection.dialect.name == "postgresql":
                query = query.with_for_update()
            row = connection.execute(query).mappings().first()
            if row is not None:
                if (row["last_window_start_us"], row["last_window_end_us"]) == (start, end):
                    return ReviewChange(_review(row), created=False, updated=False)
                values = {
                    "breaches": row["breaches"] + 1,
                    "updated_at_us": now,
                    "last_window_start_us": start,
                    "last_window_end_us": end,
                    "observed": observed,
                    "features": json.dumps(
                        sorted(set(json.loads(row["features"])) | set(features))
                    ),
                    "evidence": json.dumps(
                        list(dict.fromkeys([*json.loads(row["evidence"]), *evidence]))
                    ),
                }
                connection.execute(
                    update(reviews_table).where(reviews_table.c.id == row["id"]).values(**values)
                )
                return ReviewChange(_review({**row, **values}), created=False, updated=True)
            values = {
                "id": f"rv-{uuid.uuid4().hex[:12]}",
                "model_name": model_name,
                "model_version": model_version,
                "monitor": monitor,
                "metric": metric,
                "status": OPEN,
                "opened_at_us": now,
                "updated_at_us": now,
                "breaches": 1,
                "first_window_start_us": start,
                "first_window_end_us": end,
                "last_window_start_us": start,
                "last_window_end_us": end,
                "observed": observed,
                "threshold": threshold,
                "features": json.dumps(sorted(set(features))),
                "evidence": json.dumps(list(dict.fromkeys(evidence))),
                "resolved_at_us": None,
                "resolved_by": None,
                "resolution": None,
            }
            connection.execute(insert(reviews_table).values(**values))
        return ReviewChange(_review(values), created=True, updated=False)

    def add_evidence(self, review_id: str, items: Sequence[str]) -> Review:
        """Append links or lines to a review's evidence (open or resolved; once each):
        a retrain it started, and that retrain's outcome, arrive after the breach."""
        with write_transaction(self.engine) as connection:
            row = _row(connection, review_id)
            evidence = list(dict.fromkeys([*json.loads(row["evidence"] or "[]"), *items]))
            values = {"evidence": json.dumps(evidence), "updated_at_us": now_us()}
            connection.execute(
                update(reviews_table).where(reviews_table.c.id == review_id).values(**values)
            )
        return _review({**row, **values})

    def get(self, review_id: str) -> Review:
        with self.engine.connect() as connection:
            return _review(_row(connection, review_id))

    def list(self, *, status: str | None = None, model_name: str | None = None) -> list[Review]:
        """Reviews, newest first, optionally only ``open`` / ``resolved`` ones of one model."""
        query = select(reviews_table).order_by(reviews_table.c.opened_at_us.desc())
        if status is not None:
            query = query.where(reviews_table.c.status == status)
        if model_name is not None:
            query = query.where(reviews_table.c.model_name == model_name)
        with self.engine.connect() as connection:
            return [_review(row) for row in connection.execute(query).mappings()]

    def resolve(self, review_id: str, *, by: str, resolution: str) -> Review:
        if not resolution.strip():
            raise ValueError("resolving a review needs a resolution text")
        with write_transaction(self.engine) as connection:
            row = _row(connection, review_id)
            if row["status"] != OPEN:
                raise StoreError(f"review '{review_id}' is already {row['status']}")
            values = {
                "status": RESOLVED,
                "resolved_at_us": now_us(),
                "resolved_by": by,
                "resolution": resolution,
                "updated_at_us": now_us(),
            }
            connection.execute(
                update(reviews_table).where(reviews_table.c.id == review_id).values(**values)
            )
        return _review({**row, **values})
