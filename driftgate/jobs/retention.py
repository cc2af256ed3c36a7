"""Sample retention: remove samples older than ``serving.sample_retention``.

:func:`purge_samples` is the whole job; ``driftgate samples purge`` runs it locally and
the ``sample-retention`` Prefect deployment (``flows/retention.py``) on a schedule on
servers. What is never removed:

* the evidence of every open review: its first and its latest window (the review store
  may be another database, so the windows are read from it and passed to the store);
* any window a drift check is judging: the check leases its window in the sample
  store from the read to the last action (:meth:`SqlSampleStore.lease`), and a pass
  skips every live lease — on PostgreSQL it locks the lease table, on SQLite it holds
  the write lock, so a lease taken during a pass is seen by it.

On PostgreSQL (columnar stores) whole daily partitions are dropped once their day is
older than the cutoff, so samples live between the retention and one day more; on
SQLite and older PostgreSQL stores rows go in short batched deletes. Labels
(:mod:`driftgate.stores.labels`) go with their samples, in the same pass.
"""

from __future__ import annotations

import dataclasses

import pandas as pd

from driftgate.config import ProjectConfig
from driftgate.core.yamlconfig import ConfigError
from driftgate.stores._sql import StoreError, is_sql_url
from driftgate.stores.factories import label_store, review_store, sample_store
from driftgate.stores.samples import (
    PurgeResult,
    storable_time,
    time_before,
    utc_now,
)


def review_windows(config: ProjectConfig) -> list[tuple[str, str]]:
    """The evidence windows (first and latest) of every open review."""
    reviews = review_store(config)
    try:
        opened = reviews.list(status="open")
    finally:
        reviews.close()
    windows = []
    for review in opened:
        for start, end in (review.first_window, review.last_window):
            if start and end and (start, end) not in windows:
                windows.append((start, end))
    return windows


def purge_samples(config: ProjectConfig, *, now=None) -> PurgeResult:
    """One retention pass over the service's sample store (see the module doc).

    Raises:
        ConfigError: ``serving.sample_retention`` is not set.
        StoreError: the sample store is not a SQL store, or failed.
    """
    retention = config.serving.retention
    if retention is None:
        raise ConfigError(
            "serving.sample_retention is not set: nothing to purge (e.g. sample_retention: 30d)"
        )
    url = config.serving.sample_store(config.home_dir)
    if not is_sql_url(url):
        raise StoreError("serving.sample_store_url: retention needs a SQL sample store")
    cutoff = time_before(storable_time(now or utc_now()), pd.Timedelta(retention))
    protected = review_windows(config)
    store = sample_store(config)
    try:
        result = store.purge(cutoff, protected)
    finally:
        store.close()
    # Labels follow their samples: those whose sample just went (see stores.labels).
    labels = label_store(config)
    try:
        deleted = labels.purge(cutoff)
    finally:
        labels.close()
    return dataclasses.replace(result, deleted_labels=deleted)
