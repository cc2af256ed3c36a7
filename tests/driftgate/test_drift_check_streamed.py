"""The drift check on a window larger than ``monitoring.contract_rows``: streamed from
the store in chunks, judged the same as in memory, leased against retention."""

from __future__ import annotations

import pickle

import numpy as np
import pandas as pd

from driftgate.jobs import drift_check as job
from driftgate.stores.samples import Sample, SqlSampleStore
from tests.conftest import mlflow_client
from tests.driftgate.test_drift_check_job import (  # noqa: F401
    MISSING,
    STEPS,
    monitored,
    write_window,
)

SAMPLED = ("2031-07-01", "2031-07-02")


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


def test_a_sampled_window_is_judged_on_its_samples_and_records_what_they_stand_for(
    monitored,  # noqa: F811
    tmp_path,
):
    # The service logged a quarter of the requests (serving.sample_fraction 0.25, by
    # request id): the monitors judge the stored samples, and the window records the
    # fraction and the records the samples stand for (4 each).
    config = configured(monitored, evidently_report=False)
    config.serving = config.serving.model_copy(
        update={"sample_store_url": f"sqlite:///{tmp_path / 'sampled.db'}"}
    )
    train, features = monitored["data"].splits.train, monitored["features"]
    pool = train[train["sea_level_pressure"].abs() < 10]  # as the fixture's calm window
    rows = pool.iloc[np.random.default_rng(11).integers(0, len(pool), 2_000)]
    start, step = pd.Timestamp(SAMPLED[0], tz="UTC"), pd.Timedelta(days=1) / 2_000
    served = [f"sampled-{i}" for i in range(2_000)]
    store = SqlSampleStore(config.serving.sample_store(config.home_dir))
    quarter = store.sampling(0.25)
    kept = [i for i, request_id in enumerate(served) if quarter.keeps(request_id)]
    assert 400 < len(kept) < 600  # a quarter, give or take, chosen by request id
    store.append(
        [
            Sample(
                timestamp=start + i * step, request_id=served[i], record_index=0,
                model_name=config.model.name, model_version=monitored["version"],
                features={f: float(rows[f].iloc[i]) for f in features},
                prediction=0.5, predicted_class=1, sample_fraction=0.25,
            )
            for i in kept
        ]
    )  # fmt: skip
    store.close()
    window = job.read(config, *SAMPLED)
    window.close()
    assert window.rows == len(kept) and window.sample_fraction == 0.25
    assert window.estimated_records == 4 * len(kept)
    assert window.traffic.accepted == len(kept)  # stored records, as the rejected are

    verdict = job.judge_window(config, monitored["gates"], *SAMPLED)
    assert verdict.rows == len(kept)  # the statistics' sample size: the stored rows
    run = mlflow_client(config.tracking.uri).get_run(verdict.run_id)
    assert float(run.data.params["sample_fraction"]) == 0.25
    assert float(run.data.params["estimated_records"]) == 4 * len(kept)
    assert run.data.metrics["rows"] == len(kept)


def counting_store_opens(monkeypatch) -> list[str]:
    """The URL of every sample store constructed from now on (each a real store)."""
    opened = []
    construct = SqlSampleStore.__init__

    def counted(self, url, **options):
        opened.append(url)
        construct(self, url, **options)

    monkeypatch.setattr(SqlSampleStore, "__init__", counted)
    return opened


def with_missing_window(monitored, tmp_path):  # noqa: F811
    """A config streaming windows of more than 100 rows from a store of its own that
    holds the MISSING window (800 rows, 10% of dew_point missing): the module's other
    tests purge theirs."""
    config = configured(monitored, contract_rows=100, evidently_report=False)
    config.serving = config.serving.model_copy(
        update={"sample_store_url": f"sqlite:///{tmp_path / 'missing.db'}"}
    )
    train = monitored["data"].splits.train
    pool = train[train["sea_level_pressure"].abs() < 10]  # as the fixture's calm window
    rows = pool.iloc[np.random.default_rng(7).integers(0, len(pool), 800)]
    store = SqlSampleStore(config.serving.sample_store(config.home_dir))
    write_window(
        store, rows, monitored["features"], MISSING, monitored["version"],
        missing="dew_point", share=0.10,
    )  # fmt: skip
    store.close()
    return config


def test_a_streamed_window_opens_its_sample_store_once(monitored, monkeypatch, tmp_path):  # noqa: F811
    # Issue 27: the read, the streamed chunks, the concentration check and the lease's
    # release each opened the store, four per window; the window's reads share one now.
    config = with_missing_window(monitored, tmp_path)
    monitors = monitored["gates"].monitors
    opened = counting_store_opens(monkeypatch)
    window = job.read(config, *MISSING)
    try:
        assert window.sampled  # so the summary streams its chunks from the store
        contract = job.validate(config, window, monitors)
        counts = job.summarise(config, window)
        decided = job.decide(config, window, counts, contract, monitors)
    finally:
        window.close()
    assert counts.rows == 800
    missing = next(r for r in decided.results if r.monitor == "missing-values")
    # A pause on missing values: the concentration check asked the store who sent them.
    assert missing.breached and missing.action == "pause_inference"
    assert len(opened) == 1, f"{len(opened)} sample stores opened for one window"
    assert opened == [config.serving.sample_store(config.home_dir)]


def test_a_pickled_window_opens_its_own_store_once_and_reads_the_same_rows(
    monitored,  # noqa: F811
    monkeypatch,
    tmp_path,
):
    # Prefect's Dask runner ships the window to a worker: the copy carries the URL, not
    # the connection, and opens one store for all of its reads.
    window = job.read(with_missing_window(monitored, tmp_path), *MISSING)
    try:
        opened = counting_store_opens(monkeypatch)
        copy = pickle.loads(pickle.dumps(window))
        assert opened == []
        first = sum(len(chunk) for chunk in copy.chunks())
        again = sum(len(chunk) for chunk in copy.chunks())
        assert first == again == window.rows == 800
        assert len(opened) == 1
    finally:
        window.close()
