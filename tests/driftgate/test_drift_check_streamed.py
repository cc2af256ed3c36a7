"""The drift check on a window larger than ``monitoring.contract_rows``: streamed from
the store in chunks, judged the same as in memory, leased against retention."""

from __future__ import annotations

import numpy as np

from driftgate.jobs import drift_check as job
from driftgate.stores.samples import SqlSampleStore
from tests.driftgate.test_drift_check_job import STEPS, monitored  # noqa: F401


def configured(monitored, **monitoring):  # noqa: F811
    config = monitored["config"].model_copy(deep=True)
    config.monitoring = config.monitoring.model_copy(update=monitoring)
    return config


def test_a_large_window_streams_and_gives_the_counts_of_the_in_memory_path(monitored):  # noqa: F811
    monitors = monitored["gates"].monitors
    whole = configured(monitored, partition_rows=128)
    streamed = configured(monitored, partition_rows=128, contract_rows=100)
    held = job.read(whole, *STEPS)
    window = job.read(streamed, *STEPS)
    try:
        assert not held.sampled and window.sampled
        assert window.rows == held.rows == 800
        assert 90 <= len(window.samples) <= 110  # an even sample, for the contract
        contract = job.validate(streamed, window, monitors)
        assert contract.row_count == 800  # the row-count rule judges the whole window
        counts = job.summarise(streamed, window)
        expected = job.summarise(whole, held)
        assert counts.rows == expected.rows == 800 and counts.chunks == expected.chunks == 7
        for name, feature in expected.features.items():
            got = counts.features[name]
            for key, value in vars(feature).items():
                if isinstance(value, np.ndarray):
                    assert np.array_equal(getattr(got, key), value), (name, key)
                else:
                    assert getattr(got, key) == value, (name, key)  # bit for bit
        decided = job.decide(streamed, window, counts, contract, monitors)
        assert [r.monitor for r in decided.results if r.breached] == ["mean-shift-kl"]
    finally:
        window.close()
        held.close()


def test_the_read_step_leases_its_window_until_closed(monitored):  # noqa: F811
    config = configured(monitored)
    url = config.serving.sample_store(config.home_dir)
    window = job.read(config, *STEPS)
    store = SqlSampleStore(url)
    try:
        store.purge("2100-01-01")  # retention far ahead: only the leased window stays
        assert store.window_stats(*STEPS).rows == 800
        assert store.count() == 800
        assert window.estimated_records == 800 and window.sample_fraction == 1.0
    finally:
        window.close()
        window.close()  # idempotent
    store.purge("2100-01-01")
    assert store.count() == 0
