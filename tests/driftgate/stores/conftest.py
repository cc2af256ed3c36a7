"""Store URLs for both back ends: a SQLite file, and a fresh database on the real
PostgreSQL server (``DRIFTGATE_TEST_POSTGRES``, default
``postgresql://postgres@127.0.0.1:5432/test``), dropped after the test."""

from __future__ import annotations

import os
import uuid

import pytest

POSTGRES_ADMIN_URL = os.environ.get(
    "DRIFTGATE_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/test"
)


def _postgres_database():
    """Create a throw-away database; yield its URL; drop it."""
    import psycopg  # a project dependency: a missing driver is a failure, not a skip

    try:
        admin = psycopg.connect(POSTGRES_ADMIN_URL, autocommit=True, connect_timeout=3)
    except psycopg.OperationalError as exc:
        # CI machines run PostgreSQL; there an unreachable server must fail the run
        # rather than hide the PostgreSQL path behind a skip.
        if os.environ.get("CI"):
            raise
        pytest.skip(f"PostgreSQL not reachable at {POSTGRES_ADMIN_URL}: {exc}")
    name = f"driftgate_test_{uuid.uuid4().hex[:12]}"
    admin.execute(f'CREATE DATABASE "{name}"')
    base, _, _ = POSTGRES_ADMIN_URL.rpartition("/")
    try:
        yield f"{base}/{name}"
    finally:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.close()


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request, tmp_path):
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'store.db'}"
    else:
        yield from _postgres_database()
