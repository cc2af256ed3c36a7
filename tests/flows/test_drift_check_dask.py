"""Scale-out of the drift check on Prefect's Dask task runner, against a local Dask cluster.

Each (row slice, feature group) cell is a ``summarise-cell`` task on a real
``distributed`` cluster of worker processes; the merged counts must equal the
in-process summary bit for bit, and so must every statistic and decision of a whole
``drift-check`` flow run.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from mlflow import MlflowClient

from driftgate import registry
from driftgate.config import load_config
from driftgate.flows.drift_check import dask_mapper, drift_check_flow
from driftgate.gates.config import load_gate_config
from driftgate.jobs import drift_check as job
from driftgate.monitors import check_drift_counts
from driftgate.monitors.partitions import (
    feature_groups,
    row_slices,
    summarise_in_process,
    summarise_parts,
)
from driftgate.monitors.profile import ReferenceProfile
from driftgate.stores.samples import Sample, SqlSampleStore

TESTS = ["ks", "kl", "psi", "js", "wasserstein", "missing_share", "mean_shift"]
DAY = ("2033-05-01", "2033-05-02")


@pytest.fixture(scope="module")
def mapper():
    """A mapper on a running cluster, reached by its scheduler address."""
    from distributed import LocalCluster

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True) as cluster:
        yield dask_mapper(cluster.scheduler_address)


@pytest.fixture(scope="module")
def production(trained_model):
    data = trained_model.data
    frame = data.splits.production[data.features].iloc[:4_000].copy()
    frame.loc[frame.index[::9], "dew_point"] = np.nan  # a flaky sensor
    return frame


def test_dask_cells_equal_in_process_cells_bit_for_bit(trained_model, production, mapper, tmp_path):
    data = trained_model.data
    profile = ReferenceProfile.fit(data.splits.train[data.features], sample_rows=0)
    groups = feature_groups(data.features, 3)
    frame_parts = row_slices(production, 700)
    file_parts = []
    for index, piece in enumerate(frame_parts):
        path = tmp_path / f"window-{index:02d}.parquet"
        piece.to_parquet(path, row_group_size=250)
        file_parts.append(str(path))
    for parts in (frame_parts, file_parts):
        local = summarise_parts(profile, parts, groups, mapper=summarise_in_process)
        on_dask = summarise_parts(profile, parts, groups, mapper=mapper)
        assert on_dask.rows == local.rows == len(production)
        assert (
            check_drift_counts(profile, on_dask, TESTS).to_dict()
            == check_drift_counts(profile, local, TESTS).to_dict()
        )


@pytest.fixture(scope="module")
def monitored(trained_model, production, tmp_path_factory):
    """A config whose sample store holds one drifted day; windows cut into 12 cells."""
    root = tmp_path_factory.mktemp("dask-drift")
    tracking = trained_model.config.tracking
    config_file = root / "driftgate.yaml"
    config_file.write_text(
        f"home: {root / 'home'}\n"
        f"tracking:\n  uri: {tracking.uri}\n  artifact_location: {tracking.artifact_location}\n"
        f"serving:\n  sample_store_url: sqlite:///{root / 'samples.db'}\n"
        f"  control_store_url: sqlite:///{root / 'control.db'}\n"
        "monitoring:\n  evidently_report: false\n  partition_rows: 1000\n  feature_groups: 3\n"
    )
    config = load_config(config_file)
    version = trained_model.outcome.registered.version
    MlflowClient(tracking_uri=tracking.uri, registry_uri=tracking.uri).set_registered_model_alias(
        config.model.name, registry.CHAMPION_ALIAS, version
    )
    start = pd.Timestamp(DAY[0], tz="UTC")
    step = pd.Timedelta(days=1) / len(production)
    store = SqlSampleStore(config.serving.sample_store(config.home_dir))
    store.append(
        [
            Sample(
                timestamp=start + i * step,
                request_id=f"dask-{i}",
                record_index=0,
                model_name=config.model.name,
                model_version=version,
                features={k: (None if np.isnan(v) else float(v)) for k, v in row.items()},
                prediction=0.5,
                predicted_class=1,
            )
            for i, (_, row) in enumerate(production.iterrows())
        ]
    )
    store.close()
    return {"config": config, "file": config_file, "gates": load_gate_config(config.gates)}


def test_a_window_streamed_from_the_store_summarises_on_dask_as_in_process(monitored, mapper):
    # Past contract_rows the window is not loaded: it streams from the sample store in
    # chunks of partition_rows (700: five whole chunks and a short one), each chunk's
    # feature groups sent to the cluster as it arrives.
    config = monitored["config"].model_copy(deep=True)
    config.monitoring = config.monitoring.model_copy(
        update={"partition_rows": 700, "contract_rows": 500}
    )
    window = job.read(config, *DAY)
    try:
        assert window.stream and window.rows == 4_000
        on_dask = job.summarise(config, window, mapper)
        local = job.summarise(config, window)
    finally:
        window.close()
    assert on_dask.rows == local.rows == 4_000 and on_dask.chunks == local.chunks == 6
    for name, expected in local.features.items():
        for key, value in vars(expected).items():
            got = getattr(on_dask.features[name], key)
            if isinstance(value, np.ndarray):
                assert np.array_equal(got, value), (name, key)
            else:
                assert got == value, (name, key)  # bit for bit
    assert on_dask.features["dew_point"].missing_count == 4_000 // 9 + 1  # the flaky sensor


def test_a_drift_check_flow_on_dask_decides_exactly_as_in_process(monitored):
    config, gates = monitored["config"], monitored["gates"]
    (on_dask,) = drift_check_flow(
        config_path=str(monitored["file"]),
        end=pd.Timestamp(DAY[1], tz="UTC").isoformat(),
        window="1d",
        dask_cluster="local:2",
    )
    # The same window judged again in process (actions are idempotent per window).
    local = job.judge_window(config, gates, *DAY)
    assert on_dask["rows"] == local.rows == 4_000
    assert on_dask["metrics"] == local.drift_metrics
    assert on_dask["breached"] == local.breached
    assert "mean-shift-kl" in local.breached  # the production period has drifted
