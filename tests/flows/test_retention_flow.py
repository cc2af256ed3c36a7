"""The ``sample-retention`` Prefect flow itself, on the session's Prefect test harness
and a real SQLite sample store and review store."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from driftgate.config import load_config
from driftgate.flows.retention import sample_retention_flow
from tests.driftgate.test_retention_job import (
    assert_purged_but_the_evidence,
    fill,
    open_and_resolved_reviews,
)


def test_the_flow_purges_old_samples_and_keeps_an_open_reviews_evidence(tmp_path):
    config_file = tmp_path / "driftgate.yaml"
    config_file.write_text("home: home\nserving:\n  sample_retention: 30d\n")
    config = load_config(config_file)
    # The flow purges against the clock. The samples are laid out back from half a day
    # ahead of it, so that none sits at the cutoff when the flow reads the clock.
    base = datetime.now(UTC) + timedelta(hours=12)
    store = fill(config, base)
    open_and_resolved_reviews(config, base)
    result = sample_retention_flow(config_path=str(config_file))
    assert_purged_but_the_evidence(store, result["deleted_rows"])
    assert result["dropped_partitions"] == []  # SQLite: rows are deleted, not partitions
