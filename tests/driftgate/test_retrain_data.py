"""The data a retrain trains on (``jobs/retrain_data.py``), on a real SQLite sample
and label store: the window's labelled records added to each split of the configured
data, the folder written once and reused, and what is refused, with its reason."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from driftgate.jobs.data import prepare_data
from driftgate.jobs.feedback import LabelInput, submit_labels
from driftgate.jobs.retrain_data import retrain_data
from driftgate.stores.labels import LabelStore
from driftgate.stores.samples import Sample, SqlSampleStore
from driftgate.training.prepared import load_splits
from driftgate.training.train import TrainParams
from tests.driftgate.test_performance_monitor import label, write_window

WINDOW = ("2041-03-01", "2041-03-02")
ROWS, LABELLED = 40, 30


@pytest.fixture
def project(project_config, tmp_path):
    return served_window(project_config, tmp_path, f"sqlite:///{tmp_path / 'samples.db'}")


def served_window(
    project_config, tmp_path, url, window=WINDOW, prefix="rt", count=ROWS, answers=None
) -> dict:
    """The project with its own home and sample store ``url``, holding ``count`` served
    records of the configured test split (request ids ``<prefix>-<window start>-<i>``),
    answered P(rain) ``answers(rows)`` (default 0.7 each)."""
    config = project_config.model_copy(deep=True)
    config.home = str(tmp_path / "home")
    config.serving = config.serving.model_copy(update={"sample_store_url": url})
    data = prepare_data(config, validate_contract=False)
    rows = data.splits.test.iloc[:count]
    answered = np.full(count, 0.7) if answers is None else answers(rows)
    store = SqlSampleStore(url)
    write_window(store, rows, answered, window, "1", prefix, list(data.features))
    store.close()
    return {"config": config, "url": url, "data": data, "rows": rows}


def test_the_labelled_records_join_each_split_and_the_folder_is_reused(project):
    config, rows = project["config"], project["rows"]
    truth = 1 - rows["rain"].to_numpy().astype(int)  # labels unlike the data's: traceable
    label(project["url"], WINDOW, truth, "rt", range(LABELLED))
    first = retrain_data(config, "rt-1", WINDOW)
    # Chronological, by the configured shares: the newest labelled records are the test
    # part (round(30 * 0.15) = 4 each for validation and test).
    assert first.added == {"train": 22, "validation": 4, "test": 4}
    assert first.summary.endswith("(22 to train, 4 to validation, 4 to test)")
    assert first.config.data.prepared == str(first.folder)
    retrained = prepare_data(first.config, validate_contract=False).splits
    configured = project["data"].splits
    for split, added in first.added.items():
        assert len(getattr(retrained, split)) == len(getattr(configured, split)) + added
    appended = retrained.train.iloc[len(configured.train) :]
    assert appended["rain"].tolist() == truth[:22].tolist()
    features = project["data"].features
    assert np.allclose(appended[features].to_numpy(), rows[features].iloc[:22].to_numpy())
    assert str(appended["date"].iloc[0]) == "2041-03-01 00:00:00"  # the event time
    written = (first.folder / "train.parquet").stat().st_mtime_ns
    again = retrain_data(config, "rt-1", WINDOW)  # the gate, or a worker, after training
    assert again.folder == first.folder and again.added == first.added
    assert (first.folder / "train.parquet").stat().st_mtime_ns == written


def test_a_window_without_labels_trains_on_the_configured_data(project):
    nothing = retrain_data(project["config"], "rt-2", WINDOW)
    assert nothing.folder is None and nothing.config is project["config"]
    assert nothing.summary.startswith("trained on the configured data (no labelled")
    assert not (project["config"].home_dir / "retrains" / "rt-2" / "data").exists()
    # Labels arriving while the candidate trains do not change the data the gate uses.
    label(project["url"], WINDOW, project["rows"]["rain"].to_numpy(), "rt", range(LABELLED))
    assert retrain_data(project["config"], "rt-2", WINDOW).folder is None
    assert retrain_data(project["config"], "rt-other", WINDOW).folder is not None


def test_labelled_samples_without_the_models_features_are_refused_by_name(project):
    config, url = project["config"], project["url"]
    window = ("2041-04-01", "2041-04-02")
    store = SqlSampleStore(url)
    store.append(
        [
            Sample(
                timestamp=f"2041-04-01T0{i}:00:00Z", request_id=f"rt-{window[0]}-{i}",
                record_index=0, model_name="rainfall-classifier", model_version="1",
                features={"humidity": 0.5}, prediction=0.5, predicted_class=1,
            )
            for i in range(5)
        ]
    )  # fmt: skip
    store.close()
    label(url, window, [1] * 5, "rt", range(5))
    with pytest.raises(ValueError, match=r"no column\(s\) \['temperature', 'dew_point'"):
        retrain_data(config, "rt-3", window)
    assert not (config.home_dir / "retrains" / "rt-3" / "data").exists()  # nothing half-written


def test_labelled_records_of_multi_record_requests_pass_the_contract_and_train(project):
    """The service stamps a request's time on each of its records: 8 requests of 5
    records are 40 rows with 8 distinct times. The demo contract had `date: unique`
    (a property of its one-row-per-day file), so the retrain's contract check refused
    them (ContractBreach: columns.date.unique) and every retrain learning from a
    multi-record request failed before training."""
    from driftgate.jobs.train import run_training

    config, url, rows = project["config"], project["url"], project["rows"]
    window, requests, per_request = ("2041-05-01", "2041-05-02"), 8, 5
    features = list(project["data"].features)
    records = rows[features].to_dict("records")
    start = pd.Timestamp(window[0], tz="UTC")
    store = SqlSampleStore(url)
    store.append(
        [
            Sample(
                timestamp=start + pd.Timedelta(hours=r), request_id=f"multi-{r}",
                record_index=i, model_name="rainfall-classifier", model_version="1",
                features={k: float(v) for k, v in records[r * per_request + i].items()},
                prediction=0.7, predicted_class=1,
            )
            for r in range(requests)
            for i in range(per_request)
        ]
    )  # fmt: skip
    store.close()
    truth = rows["rain"].astype(int).tolist()
    labels = LabelStore(url)
    try:
        outcome = submit_labels(
            labels,
            [
                LabelInput(r * per_request + i, f"multi-{r}", i, truth[r * per_request + i])
                for r in range(requests)
                for i in range(per_request)
            ],
            outputs_of=lambda name, version: ("binary", ()),
            horizon=None,
            source="test-labels",
            all_or_nothing=False,
        )
    finally:
        labels.close()
    assert outcome.counts()["accepted"] == requests * per_request
    built = retrain_data(config, "rt-multi", window)
    assert sum(built.added.values()) == requests * per_request
    # The data the contract is checked on holds the shared times: the scenario is real.
    train = load_splits(built.folder).train
    assert train["date"].iloc[-built.added["train"] :].duplicated().sum() > 0
    # As jobs.retrain.run_retrain trains: the contract enforced, then fit and register
    # (its own model name and two epochs: the check and the training are what is tested).
    retrain_config = built.config.model_copy(deep=True)
    retrain_config.model = retrain_config.model.model_copy(update={"name": "rainfall-multi"})
    retrain_config.train = TrainParams(max_epochs=2, patience=2)
    trained = run_training(retrain_config, on_epoch=None)
    assert trained.registered.version == "1"
    assert trained.epochs_run >= 1


def test_retrain_data_recent_reads_before_the_window_and_can_leave_the_reference_out(project):
    """``retrain.data``: the labelled records of the last ``recent`` (not only the
    breaching window), at most ``rows`` of the newest, and with ``reference: exclude``
    nothing of the configured data, the newest tested (issue 29)."""
    from driftgate.jobs.retrain_data import save_data_settings
    from driftgate.monitors.rules import RetrainDataSettings
    from driftgate.stores.samples import SqlSampleStore

    config, url, rows = project["config"], project["url"], project["rows"]
    label(url, WINDOW, rows["rain"].to_numpy(), "rt", range(LABELLED))
    earlier = ("2041-01-10", "2041-01-11")  # 50 days before the breaching window
    store = SqlSampleStore(url)
    write_window(store, rows, np.full(len(rows), 0.7), earlier, "1", "old",
                 list(project["data"].features))  # fmt: skip
    store.close()
    label(url, earlier, rows["rain"].to_numpy(), "old", range(LABELLED))

    recent = RetrainDataSettings(recent="90d", reference="exclude")
    save_data_settings(config, "rt-recent", recent)
    built = retrain_data(config, "rt-recent", WINDOW)
    assert sum(built.added.values()) == 2 * LABELLED  # both windows, nothing else
    assert "labelled records of the last 90d alone, the newest tested" in built.summary
    splits = prepare_data(built.config, validate_contract=False).splits
    assert len(splits.train) + len(splits.validation) + len(splits.test) == 2 * LABELLED
    assert splits.train["date"].max() <= splits.test["date"].min()  # in time order
    assert splits.test["date"].min() >= pd.Timestamp(WINDOW[0])  # the newest are tested
    # ... and the candidate learns from every older one: the validation rows are drawn
    # from the rows before the test, so training reaches the newest untested records
    # (cut chronologically, training ended where validation began: after a change in
    # the window's last 30%, the candidate knew only the past and answered one class).
    assert splits.train["date"].max() > splits.validation["date"].min()
    assert splits.train["date"].max() >= pd.Timestamp(WINDOW[0])

    save_data_settings(config, "rt-rows", recent.model_copy(update={"rows": 20}))
    assert sum(retrain_data(config, "rt-rows", WINDOW).added.values()) == 20
    # Without settings recorded: the breaching window, appended to the configured data.
    default = retrain_data(config, "rt-default", WINDOW)
    assert sum(default.added.values()) == LABELLED
