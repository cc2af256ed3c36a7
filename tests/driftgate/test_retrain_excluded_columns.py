"""A whole retrain (its data, the contract, training, registering, the gate) of a
user's project whose model excludes an id and another model's score, under a contract
that requires both (issue 29). On a public car-loan data set the retrain failed with
``ContractBreach: ... columns.id.dtype: column 'id' has dtype float64, expected int``:
the window's records hold what the service received (the features), not the
excluded columns. ``test_data_job.py`` checks the contract step alone; this runs the
retrain job end to end, on its own MLflow store (SQLite, in the project's home).
"""

from __future__ import annotations

from datetime import timedelta

import pandas as pd
from typer.testing import CliRunner

from driftgate.cli import app
from driftgate.config import load_config
from driftgate.jobs.retrain import run_retrain
from driftgate.stores.factories import retrain_store
from driftgate.stores.labels import LabelStore
from driftgate.stores.retrains import DONE
from driftgate.stores.samples import Sample, SqlSampleStore
from driftgate.training.params import TrainParams
from tests.driftgate.test_data_job import CONFIG, _write
from tests.driftgate.test_performance_monitor import label

WINDOW = ("2024-02-01", "2024-02-02")


def test_a_retrain_with_excluded_id_and_score_columns_the_contract_requires_succeeds(tmp_path):
    _write(tmp_path)
    _write(tmp_path, rows=100, first_id=1000)
    (tmp_path / "driftgate.yaml").write_text(CONFIG)
    inferred = CliRunner().invoke(
        app, ["--config", str(tmp_path / "driftgate.yaml"), "contract", "infer", "--optional",
              "timestamp"],
    )  # fmt: skip
    assert inferred.exit_code == 0, inferred.output
    assert "OrderId: {dtype: int" in inferred.output  # the contract requires the id ...
    assert "OtherModelScore: {dtype: float" in inferred.output  # ... and the score
    contract = inferred.output + "  Returned: {dtype: int, required: false, categories: [0, 1]}\n"
    (tmp_path / "contract.yaml").write_text(contract)
    (tmp_path / "driftgate.yaml").write_text(CONFIG + "  contract: contract.yaml\n")
    config = load_config(tmp_path / "driftgate.yaml")
    config.train = TrainParams(max_epochs=3, patience=2)  # the steps are tested, not the fit
    assert str(tmp_path) in config.tracking.uri  # its own MLflow store

    # 60 production records as the service stored them: the features, no id, no score;
    # 50 of them labelled.
    production = pd.read_csv(tmp_path / "production.csv").sort_values("timestamp").head(60)
    start = pd.Timestamp(WINDOW[0], tz="UTC")
    url = config.serving.sample_store(config.home_dir)
    store = SqlSampleStore(url)
    store.append(
        [
            Sample(
                timestamp=start + pd.Timedelta(minutes=10 * i), request_id=f"ex-{WINDOW[0]}-{i}",
                record_index=0, model_name=config.model.name, model_version="1",
                features={"StoreRegion": row.StoreRegion, "Channel": row.Channel,
                          "BasketValue": float(row.BasketValue)},
                prediction=0.4, predicted_class=0,
            )
            for i, row in enumerate(production.itertuples())
        ]
    )  # fmt: skip
    store.close()
    label(url, WINDOW, [i % 2 for i in range(60)], "ex", range(50))
    assert not LabelStore(url).labelled_window(*WINDOW).empty

    retrains = retrain_store(config)
    try:
        claim = retrains.claim(
            model_name=config.model.name, champion_version="-", monitor="kl",
            window_start=WINDOW[0], window_end=WINDOW[1], review_id=None,
            lease=timedelta(hours=1),
        )  # fmt: skip
    finally:
        retrains.close()
    retrained = run_retrain(config, claim.retrain.id)
    retrain = retrained.retrain
    assert retrain.status == DONE, retrain.outcome
    assert retrain.candidate_version == retrained.training.registered.version
    assert "the window's labelled records (34 to train, 8 to validation, 8 to test)" in (
        retrain.detail
    ), retrain.detail
    assert retrained.gate["passed"] in (True, False)  # the gate judged the candidate
