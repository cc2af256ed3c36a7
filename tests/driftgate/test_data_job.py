"""The jobs' data step on a user's files: no renaming, labels joined by key, a real
time column, separate reference and production files, `exclude`, categorical specs,
and the contract inferred from the same file holding in training."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from driftgate.cli import app
from driftgate.config import load_config
from driftgate.core.yamlconfig import ConfigError
from driftgate.jobs.data import prepare_data
from driftgate.training.data import DataError

ROWS = 400


def _write(folder: Path, rows: int = ROWS, first_id: int = 0, shuffled: bool = True) -> None:
    rng = np.random.default_rng(first_id)
    times = pd.date_range("2024-01-01", periods=rows, freq="h") + pd.Timedelta(days=first_id)
    frame = pd.DataFrame(
        {
            "OrderId": np.arange(first_id, first_id + rows),
            "timestamp": times.strftime("%Y-%m-%dT%H:%M:%S"),
            "StoreRegion": pd.Categorical(rng.choice(["N", "S", "E"], rows)),
            "Channel": rng.choice(["web", "shop"], rows),
            "BasketValue": rng.gamma(2.0, 20.0, rows).round(2),
            "OtherModelScore": rng.random(rows),
        }
    )
    if shuffled:  # the file is not in time order; the time column is
        frame = frame.sample(frac=1.0, random_state=1)
    name = "reference.pq" if first_id == 0 else "production.csv"
    if name.endswith(".pq"):
        frame.to_parquet(folder / name, index=False)
    else:
        frame.to_csv(folder / name, index=False)
    if first_id == 0:
        labels = pd.DataFrame({"OrderId": frame["OrderId"], "Returned": rng.integers(0, 2, rows)})
        labels.to_csv(folder / "labels.csv", index=False)


CONFIG = """
home: state
data:
  reference: reference.pq
  production: production.csv
  labels: {source: labels.csv, key: OrderId}
  target: Returned
  time_column: timestamp
  exclude: [OrderId, OtherModelScore]
"""


@pytest.fixture
def project(tmp_path: Path) -> Path:
    _write(tmp_path)
    _write(tmp_path, rows=100, first_id=1000)
    (tmp_path / "driftgate.yaml").write_text(CONFIG)
    return tmp_path


def test_a_users_files_are_taken_as_named_with_labels_time_and_exclusions(project, caplog):
    caplog.set_level("INFO")
    data = prepare_data(load_config(project / "driftgate.yaml"))
    assert data.features == ["StoreRegion", "Channel", "BasketValue"]  # as in the file
    assert "taking 3 column(s): StoreRegion, Channel, BasketValue" in caplog.text
    assert [s.kind for s in data.specs] == ["categorical", "categorical", "numeric"]
    assert data.specs[0].categories == ("E", "N", "S")
    splits = data.splits
    assert (len(splits.train), len(splits.validation), len(splits.test)) == (280, 60, 60)
    assert len(splits.production) == 100 and splits.production["Returned"].isna().all()
    for earlier, later in ((splits.train, splits.validation), (splits.validation, splits.test)):
        assert earlier["timestamp"].max() < later["timestamp"].min()  # by the time column
    assert pd.api.types.is_datetime64_any_dtype(splits.train["timestamp"])
    assert data.data_path == "reference.pq"  # relative to the project


def test_a_contract_inferred_from_the_file_holds_in_training(project):
    runner = CliRunner()
    inferred = runner.invoke(
        app, ["--config", str(project / "driftgate.yaml"), "contract", "infer", "--optional",
              "timestamp"],
    )  # fmt: skip
    assert inferred.exit_code == 0, inferred.output
    contract = inferred.output + "  Returned: {dtype: int, required: false, categories: [0, 1]}\n"
    (project / "contract.yaml").write_text(contract)
    (project / "driftgate.yaml").write_text(CONFIG + "  contract: contract.yaml\n")
    data = prepare_data(load_config(project / "driftgate.yaml"))
    assert data.contract_result.passed, [f.message for f in data.contract_result.failures]


def test_source_and_reference_together_are_refused(project):
    (project / "driftgate.yaml").write_text(CONFIG + "  source: reference.pq\n")
    with pytest.raises(ConfigError, match=r"either source .* or reference"):
        load_config(project / "driftgate.yaml")


def test_an_excluded_column_that_does_not_exist_is_named(project):
    (project / "driftgate.yaml").write_text(CONFIG.replace("OtherModelScore]", "OtherScore]"))
    with pytest.raises(DataError, match=r"data\.exclude names column\(s\) not in the data"):
        prepare_data(load_config(project / "driftgate.yaml"))


def test_a_labels_file_with_a_repeated_key_is_refused(project):
    labels = pd.read_csv(project / "labels.csv")
    pd.concat([labels, labels.head(1)]).to_csv(project / "labels.csv", index=False)
    with pytest.raises(DataError, match=r"key 'OrderId' repeats"):
        prepare_data(load_config(project / "driftgate.yaml"))


@pytest.mark.parametrize("split", ["random", "stratified"])
def test_random_and_stratified_splits_are_seeded(project, split):
    (project / "driftgate.yaml").write_text(CONFIG + f"  split: {split}\n  split_seed: 3\n")
    first = prepare_data(load_config(project / "driftgate.yaml"))
    again = prepare_data(load_config(project / "driftgate.yaml"))
    assert first.digest == again.digest
    assert first.splits.test["timestamp"].is_monotonic_increasing
    assert first.splits.test["timestamp"].min() < first.splits.train["timestamp"].max()


def _with_year_times(project: Path) -> None:
    """The reference's time column as whole years (a common public-data shape)."""
    frame = pd.read_parquet(project / "reference.pq")
    frame["timestamp"] = 2000 + np.arange(len(frame)) % 20
    frame.to_parquet(project / "reference.pq", index=False)


def test_an_integer_year_time_column_without_a_unit_is_refused_naming_it(
    project, monkeypatch, capsys
):
    """A year 2015 was read as 2015 ns after 1970 (train_start 1970-01-01T00:00:00.000002015)."""
    from driftgate.cli import main

    _with_year_times(project)
    args = ["prepare", "--out", str(project / "data"), "-c", str(project / "driftgate.yaml")]
    monkeypatch.setattr(sys, "argv", ["driftgate", *args])
    with pytest.raises(SystemExit) as exited:
        main()
    error = capsys.readouterr().err
    assert exited.value.code == 2, error
    assert "reference.pq: data.time_column 'timestamp' holds numbers (e.g. 2000)" in error
    assert "set data.time_unit" in error
    assert not (project / "data").exists()


def test_an_integer_year_time_column_is_read_as_years_when_told(project):
    _with_year_times(project)
    (project / "driftgate.yaml").write_text(CONFIG + "  time_unit: year\n")
    production = pd.read_csv(project / "production.csv")
    production["timestamp"] = 2020
    production.to_csv(project / "production.csv", index=False)
    splits = prepare_data(load_config(project / "driftgate.yaml")).splits
    assert splits.train["timestamp"].min() == pd.Timestamp("2000-01-01")
    assert splits.test["timestamp"].max() == pd.Timestamp("2019-01-01")
    assert (splits.production["timestamp"] == pd.Timestamp("2020-01-01")).all()


@pytest.mark.parametrize(
    "unit, value, expected", [("s", 86_400, "1970-01-02"), ("ms", 0, "1970-01-01")]
)
def test_an_epoch_time_column_is_read_in_the_named_unit(project, unit, value, expected):
    frame = pd.read_parquet(project / "reference.pq")
    frame["timestamp"] = value + np.arange(len(frame))
    frame.to_parquet(project / "reference.pq", index=False)
    production = pd.read_csv(project / "production.csv")
    production["timestamp"] = value
    production.to_csv(project / "production.csv", index=False)
    (project / "driftgate.yaml").write_text(CONFIG + f"  time_unit: {unit}\n")
    splits = prepare_data(load_config(project / "driftgate.yaml")).splits
    assert splits.train["timestamp"].min() == pd.Timestamp(expected, tz="UTC")


def test_constant_and_id_like_columns_are_reported_and_not_taken(project, caplog):
    """A constant column and a ticket number became features silently (the labels'
    key, OrderId here, never is one)."""
    frame = pd.read_parquet(project / "reference.pq")
    frame["Country"] = "NZ"
    frame["Ticket"] = [f"T-{i:05d}" for i in range(len(frame))]
    frame.to_parquet(project / "reference.pq", index=False)
    production = pd.read_csv(project / "production.csv")
    production["Country"], production["Ticket"] = "NZ", "T-99999"
    production.to_csv(project / "production.csv", index=False)
    (project / "driftgate.yaml").write_text(CONFIG.replace("[OrderId, OtherModelScore]", "[]"))
    caplog.set_level("INFO")
    data = prepare_data(load_config(project / "driftgate.yaml"))
    assert data.features == ["StoreRegion", "Channel", "BasketValue", "OtherModelScore"]
    assert (
        "reference.pq: data.features not set: not taking Country (constant, one value: "
        "'NZ'), Ticket (id-like, every value distinct)" in caplog.text
    )
    named = CONFIG.replace("[OrderId, OtherModelScore]", "[]") + (
        "  features: [BasketValue, Country, Ticket]\n"
    )
    (project / "driftgate.yaml").write_text(named)
    assert prepare_data(load_config(project / "driftgate.yaml")).features == [
        "BasketValue", "Country", "Ticket",
    ]  # fmt: skip


def test_consecutive_integers_are_id_like_but_a_spread_count_is_not():
    from driftgate.training.data import uninformative

    rows = 200
    assert uninformative(pd.Series(np.arange(5000, 5000 + rows))) is not None
    assert uninformative(pd.Series(np.arange(rows) * 997 + 20_000)) is None  # e.g. incomes
    assert uninformative(pd.Series(np.arange(40))) is None  # too few rows to tell
    assert uninformative(pd.Series([1.5] * 10 + [np.nan])).startswith("constant")


def test_a_retrains_data_is_judged_by_the_contract_on_the_columns_the_model_uses(project):
    """Issue 29: a retrain with an excluded id column that the contract requires crashed
    with `ContractBreach: columns.OrderId.dtype: column 'OrderId' has dtype float64,
    expected int`: the window's rows hold what the service received, not the id."""
    from driftgate.data_contracts.breach import ContractBreach
    from driftgate.jobs.retrain_data import _append
    from driftgate.training.data import Splits
    from driftgate.training.prepared import WINDOW_ROWS_FILE, save_prepared

    inferred = CliRunner().invoke(
        app, ["--config", str(project / "driftgate.yaml"), "contract", "infer", "--optional",
              "timestamp"],
    )  # fmt: skip
    assert inferred.exit_code == 0, inferred.output
    assert "OrderId: {dtype: int" in inferred.output  # the contract requires the id
    contract = inferred.output + "  Returned: {dtype: int, required: false, categories: [0, 1]}\n"
    (project / "contract.yaml").write_text(contract)
    (project / "driftgate.yaml").write_text(CONFIG + "  contract: contract.yaml\n")
    data = prepare_data(load_config(project / "driftgate.yaml"))
    window = data.splits.train.head(20).drop(columns=["OrderId", "OtherModelScore"])
    splits = Splits(
        train=_append(data.splits.train, window),
        validation=data.splits.validation,
        test=data.splits.test,
        production=data.splits.production,
    )
    folder = project / "retrain-data"
    save_prepared(pd.concat([splits.reference, splits.production]), splits, folder)
    (project / "driftgate.yaml").write_text(
        CONFIG + "  contract: contract.yaml\n  prepared: retrain-data\n"
    )
    with pytest.raises(ContractBreach, match=r"OrderId.*float64, expected int"):
        prepare_data(load_config(project / "driftgate.yaml"))  # not marked as a retrain's
    (folder / WINDOW_ROWS_FILE).write_text("train 20\nvalidation 0\ntest 0\n")
    retrained = prepare_data(load_config(project / "driftgate.yaml"))
    assert retrained.contract_result.passed
    assert len(retrained.splits.train) == len(data.splits.train) + 20
    assert "OrderId" not in retrained.contract_result.columns  # judged on the model's columns


def _reference_with_its_target(project: Path) -> None:
    """The reference holds its own target; labels.csv labels the production records."""
    reference = pd.read_parquet(project / "reference.pq")
    reference["Returned"] = np.random.default_rng(5).integers(0, 2, len(reference))
    reference.to_parquet(project / "reference.pq", index=False)
    production = pd.read_csv(project / "production.csv")
    labels = pd.DataFrame({"OrderId": production["OrderId"], "returned_flag": 1})
    labels.iloc[::2].to_csv(project / "labels.csv", index=False)  # half are labelled


PRODUCTION_LABELS = CONFIG.replace(
    "labels: {source: labels.csv, key: OrderId}",
    "labels: {source: labels.csv, key: OrderId, target: returned_flag}",
)


def test_production_labels_beside_a_reference_with_its_target_label_production(project):
    # Before: "reference.pq: already has the target column 'Returned'; data.labels would
    # join a second" - production labels could not be configured at all.
    _reference_with_its_target(project)
    (project / "driftgate.yaml").write_text(PRODUCTION_LABELS)
    data = prepare_data(load_config(project / "driftgate.yaml"))
    reference = pd.concat([data.splits.train, data.splits.validation, data.splits.test])
    assert len(reference) == ROWS  # every reference row kept, with its own target
    production = data.splits.production
    assert production["Returned"].notna().sum() == 50  # the labels file's, by OrderId
    assert "OrderId" not in data.features


def test_production_labels_without_a_production_file_are_refused_saying_why(project):
    _reference_with_its_target(project)
    (project / "driftgate.yaml").write_text(PRODUCTION_LABELS.replace(
        "  production: production.csv\n", ""
    ))  # fmt: skip
    expected = r"already has the target column 'Returned'.*with data\.production set, data\.labels"
    with pytest.raises(DataError, match=expected + r" labels the production"):
        prepare_data(load_config(project / "driftgate.yaml"))


def test_a_labels_file_without_its_label_column_is_refused_naming_file_and_column(project):
    _reference_with_its_target(project)
    (project / "driftgate.yaml").write_text(PRODUCTION_LABELS.replace("returned_flag", "flag"))
    expected = r"labels\.csv: label column 'flag' \(data\.labels\.target\) not found; columns"
    with pytest.raises(DataError, match=expected + ": OrderId, returned_flag") as raised:
        prepare_data(load_config(project / "driftgate.yaml"))
    assert raised.value.exit_code == 2
