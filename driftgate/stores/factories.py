"""Open the stores of a project from its config: one place for where each one lives.

Used by the CLI, the jobs, the drift check and the promotion lock alike, so they always
open the same databases (``serving.*_store_url`` and ``monitoring.review_store_url``, by
default SQLite files under the project's home) with the same durability
(``serving.sqlite_synchronous``). Jobs and flows open stores only here
(``tests/test_store_factories.py`` fails on a store class constructed there).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the config package must stay importable without the stores
    from driftgate.config import ProjectConfig


def _sample_url(config: ProjectConfig) -> str:
    return config.serving.sample_store(config.home_dir)


def open_reader(config: ProjectConfig, source: str | None = None):
    """The sample store of the service, or ``source``: a store URL or a Parquet/CSV path."""
    from driftgate.stores.samples import open_sample_reader

    return open_sample_reader(
        source or _sample_url(config), sqlite_synchronous=config.serving.sqlite_synchronous
    )


def sample_store_at(url: str, *, sqlite_synchronous: str = "FULL"):
    """The SQL sample store at ``url``: for a holder of a URL without the config (a
    drift-check window, which must pickle); otherwise :func:`sample_store`."""
    from driftgate.stores.samples import SqlSampleStore

    return SqlSampleStore(url, sqlite_synchronous=sqlite_synchronous)


def sample_store(config: ProjectConfig, url: str | None = None):
    """The service's SQL sample store (or the one at ``url``, e.g. a drift check's
    ``--source``)."""
    return sample_store_at(
        url or _sample_url(config), sqlite_synchronous=config.serving.sqlite_synchronous
    )


def label_store(config: ProjectConfig, url: str | None = None):
    """Labels: in the sample store's database (or ``url``'s), so each joins its sample."""
    from driftgate.stores.labels import LabelStore

    return LabelStore(
        url or _sample_url(config), sqlite_synchronous=config.serving.sqlite_synchronous
    )


def _review_url(config: ProjectConfig) -> str:
    return config.monitoring.review_store_url or config.serving.control_store(config.home_dir)


def review_store(config: ProjectConfig):
    from driftgate.stores.reviews import ReviewStore

    return ReviewStore(_review_url(config), sqlite_synchronous=config.serving.sqlite_synchronous)


def monitor_state_store(config: ProjectConfig):
    """Hysteresis state and the action ledger: in the review store's database, so a
    review and the state that opened it are committed to the same place."""
    from driftgate.stores.monitor_state import MonitorStateStore

    return MonitorStateStore(
        _review_url(config), sqlite_synchronous=config.serving.sqlite_synchronous
    )


def control_store(config: ProjectConfig):
    from driftgate.stores.control import ControlStore

    return ControlStore(
        config.serving.control_store(config.home_dir),
        sqlite_synchronous=config.serving.sqlite_synchronous,
    )


def retrain_store(config: ProjectConfig):
    """Retrains started by monitors (one in flight per model): beside the reviews they
    answer."""
    from driftgate.stores.retrains import RetrainStore

    return RetrainStore(_review_url(config), sqlite_synchronous=config.serving.sqlite_synchronous)
