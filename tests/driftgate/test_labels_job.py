"""``driftgate labels load FILE`` and label retention, on real SQLite stores and the
session's real MLflow store: a file's rows joined by request id and record index,
judged as POST /feedback judges them, counted by kind."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pandas as pd
import pytest
from typer.testing import CliRunner

from driftgate.cli import app
from driftgate.jobs.feedback import LabelFileError, load_labels, read_label_file
from driftgate.jobs.retention import purge_samples
from driftgate.stores.labels import LabelStore
from driftgate.stores.samples import Sample, SqlSampleStore

SERVED = datetime(2033, 5, 1, tzinfo=UTC)


@pytest.fixture
def project(trained_model, tmp_path):
    config = trained_model.config.model_copy(deep=True)
    config.serving = config.serving.model_copy(
        update={
            "sample_store_url": f"sqlite:///{tmp_path / 'samples.db'}",
            "control_store_url": f"sqlite:///{tmp_path / 'control.db'}",
            "label_horizon": None,
            "sample_retention": "30d",
        }
    )
    config.home = str(tmp_path / "home")
    version = trained_model.outcome.registered.version
    store = SqlSampleStore(config.serving.sample_store(config.home_dir))
    store.append(
        [
            Sample(
                SERVED + timedelta(days=d),
                f"req-{d}",
                i,
                config.model.name,
                version,
                {"x": 1.0},
                0.4,
                0,
            )
            for d in range(3)
            for i in range(2)
        ]
    )
    store.close()
    return config


def test_a_file_is_loaded_with_counts_of_every_kind(project, tmp_path):
    file = tmp_path / "labels.csv"
    pd.DataFrame(
        {
            "request_id": ["req-0", "req-0", "req-1", "req-1", "nope", "req-2", "req-0"],
            "record_index": [0, 1, 0, 1, 0, 0, 0],
            "label": [1, 0, 1, 2, 1, 0, 0],  # req-1/1: not 0/1; req-0/0 twice, differently
        }
    ).to_csv(file, index=False)
    outcome = load_labels(project, file)
    assert outcome.counts() == {
        "accepted": 4, "duplicates": 0, "corrected": 0, "unsampled": 0, "unknown": 1,
        "late": 0, "invalid": 1, "conflicts": 1,
    }  # fmt: skip
    assert [(r.position, r.request_id) for r in outcome.unknown] == [(4, "nope")]
    assert "must be the integer 0 or 1, got 2" in outcome.invalid[0].reason
    again = load_labels(project, file)  # idempotent: the same file twice
    assert again.counts()["accepted"] == 0 and again.counts()["duplicates"] == 4


def test_labels_of_unlogged_requests_are_told_apart_by_the_stores_sampling_key(project, tmp_path):
    # At sample_fraction 0.5 the service logs a request when the store's keyed hash
    # keeps its id; `labels load` must decide the same way: an id not kept is counted
    # unsampled, one that would have been kept but has no sample is unknown.
    project.serving = project.serving.model_copy(update={"sample_fraction": 0.5})
    ids = [f"unseen-{i}" for i in range(40)]
    file = tmp_path / "labels.csv"
    pd.DataFrame({"request_id": ids, "record_index": 0, "label": 1}).to_csv(file, index=False)
    store = SqlSampleStore(project.serving.sample_store(project.home_dir))
    try:
        kept = {i for i in ids if store.sampling(0.5).keeps(i)}
    finally:
        store.close()
    assert 0 < len(kept) < len(ids)
    outcome = load_labels(project, file)
    assert {r.request_id for r in outcome.unknown} == kept
    assert {key[0] for key in outcome.unsampled} == set(ids) - kept


def test_the_command_prints_the_counts_and_fails_when_rows_were_refused(
    project, project_dir, tmp_path
):
    # The session project's file, with this test's stores and home.
    text = (
        (project_dir / "driftgate.yaml")
        .read_text()
        .replace(
            "serving:\n",
            f"serving:\n  sample_store_url: {project.serving.sample_store_url}\n"
            f"  control_store_url: {project.serving.control_store_url}\n",
        )
    )
    config_file = project_dir / f"labels-{tmp_path.name}.yaml"
    config_file.write_text(text.replace("home: state", f"home: {project.home}"))
    good = tmp_path / "good.parquet"
    pd.DataFrame({"request_id": ["req-2"], "record_index": [1], "label": [1]}).to_parquet(good)
    result = CliRunner().invoke(app, ["labels", "load", str(good), "--config", str(config_file)])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["counts"]["accepted"] == 1
    bad = tmp_path / "bad.csv"
    pd.DataFrame({"request_id": ["nope"], "record_index": [0], "label": [1]}).to_csv(bad)
    result = CliRunner().invoke(app, ["labels", "load", str(bad), "--config", str(config_file)])
    assert result.exit_code == 1
    assert json.loads(result.output)["problems"][0]["kind"] == "unknown"
    # Who vouches for the file is stored with each label (issue 28): `--source`, else
    # `labels-load`; `admin` is the admin token's and refused, naming the option.
    named = tmp_path / "named.csv"
    pd.DataFrame({"request_id": ["req-1"], "record_index": [0], "label": [0]}).to_csv(named)
    command = ["labels", "load", str(named), "--config", str(config_file)]
    refused = CliRunner().invoke(app, [*command, "--source", "admin"])
    assert refused.exit_code == 2 and "--source" in refused.output, refused.output
    assert CliRunner().invoke(app, [*command, "--source", "annotators"]).exit_code == 0
    store = LabelStore(project.serving.sample_store(project.home_dir))
    try:
        found = store.stored_of([("req-2", 1), ("req-1", 0)])
    finally:
        store.close()
    assert {key: s.source for key, s in found.items()} == {
        ("req-2", 1): "labels-load",
        ("req-1", 0): "annotators",
    }


def test_a_file_without_the_columns_names_them(tmp_path):
    file = tmp_path / "labels.csv"
    pd.DataFrame({"id": ["a"], "label": [1]}).to_csv(file, index=False)
    with pytest.raises(LabelFileError, match=r"missing column\(s\) request_id, record_index"):
        read_label_file(file)
    pd.DataFrame({"request_id": ["a"], "record_index": [0.5], "label": [1]}).to_csv(
        file, index=False
    )
    with pytest.raises(LabelFileError, match="column record_index: row 0"):
        read_label_file(file)


def test_retention_removes_labels_with_their_samples(project, tmp_path):
    file = tmp_path / "labels.csv"
    pd.DataFrame(
        {"request_id": ["req-0", "req-2"], "record_index": [0, 0], "label": [1, 1]}
    ).to_csv(file, index=False)
    assert load_labels(project, file).counts()["accepted"] == 2
    result = purge_samples(project, now=SERVED + timedelta(days=31, hours=12))
    assert result.deleted_rows == 4  # days 0 and 1
    assert result.deleted_labels == 1 and result.to_dict()["deleted_labels"] == 1
    store = LabelStore(project.serving.sample_store(project.home_dir))
    try:
        assert set(store.labels_of([("req-0", 0), ("req-2", 0)])) == {("req-2", 0)}
    finally:
        store.close()
