"""Categorical columns through the contract: inferred with their levels from a pandas
``category`` or text column, validated on the file they came from, and the
``unseen: reject | allow`` policy in the batch and the per-record validators."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from driftgate.cli import app
from driftgate.core.yamlconfig import ConfigError
from driftgate.data_contracts import Contract, RecordValidator, validate_batch

runner = CliRunner()


def _frame(rows: int = 60) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "StoreId": range(rows),
            "Region": pd.Categorical(["North", "South", "East"] * (rows // 3)),
            "Channel": ["web", "shop"] * (rows // 2),
            "Grade": pd.Categorical([1, 2, 3] * (rows // 3)),
            "Amount": [float(i) for i in range(rows)],
            "timestamp": pd.date_range("2024-01-01", periods=rows, freq="h"),
        }
    )


@pytest.mark.parametrize("suffix", [".parquet", ".pq"])
def test_contract_inferred_from_a_file_validates_that_file(tmp_path: Path, suffix: str) -> None:
    data = tmp_path / f"sales{suffix}"
    _frame().to_parquet(data)
    inferred = runner.invoke(app, ["contract", "infer", str(data)])
    assert inferred.exit_code == 0, inferred.output
    contract = Contract.from_yaml(inferred.output)
    assert contract.columns["Region"].dtype == "string"  # not the dtype name "category"
    assert contract.columns["Region"].categories == ["East", "North", "South"]  # its levels
    assert contract.columns["Grade"].dtype == "int"
    assert contract.columns["timestamp"].dtype == "datetime"
    (tmp_path / "contract.yaml").write_text(inferred.output)
    checked = runner.invoke(
        app, ["contract", "validate", str(data), "--contract", str(tmp_path / "contract.yaml")]
    )
    assert checked.exit_code == 0, checked.output


def test_a_csv_timestamp_column_is_datetime_in_infer(tmp_path: Path) -> None:
    data = tmp_path / "sales.csv"
    _frame().to_csv(data, index=False)
    inferred = runner.invoke(app, ["contract", "infer", str(data)])
    assert inferred.exit_code == 0, inferred.output
    contract = Contract.from_yaml(inferred.output)
    assert contract.columns["timestamp"].dtype == "datetime"
    assert contract.columns["Channel"].categories == ["shop", "web"]


TIMESTAMPS = {
    "naive": lambda t: t,
    "utc": lambda t: t.dt.tz_localize("UTC"),
    "named-zone": lambda t: t.dt.tz_localize("Europe/Paris"),
    "offset-text": lambda t: t.dt.tz_localize("UTC").dt.tz_convert("US/Eastern").astype(str),
}


@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
@pytest.mark.parametrize("kind", sorted(TIMESTAMPS))
def test_a_file_passes_the_contract_inferred_from_it_whatever_its_time_zone(
    tmp_path: Path, kind: str, suffix: str
) -> None:
    """A time-zone-aware column (``datetime64[ns, UTC]``) was inferred as ``datetime``
    and then failed it: ``has dtype datetime64[ns, UTC], expected datetime``. The same
    for a named zone and for CSV text with offsets, which is read as zone-aware."""
    frame = _frame()
    frame["timestamp"] = TIMESTAMPS[kind](frame["timestamp"])
    data = tmp_path / f"sales{suffix}"
    frame.to_csv(data, index=False) if suffix == ".csv" else frame.to_parquet(data)
    inferred = runner.invoke(app, ["contract", "infer", str(data)])
    assert inferred.exit_code == 0, inferred.output
    assert Contract.from_yaml(inferred.output).columns["timestamp"].dtype == "datetime"
    (tmp_path / "contract.yaml").write_text(inferred.output)
    checked = runner.invoke(
        app, ["contract", "validate", str(data), "--contract", str(tmp_path / "contract.yaml")]
    )
    assert checked.exit_code == 0, checked.output
    assert "columns.timestamp.dtype` | pass" in checked.output


CONTRACT = """
name: sales
columns:
  Region: {{dtype: string, categories: [North, South], unseen: {unseen}}}
"""


@pytest.mark.parametrize("unseen", ["reject", "allow"])
def test_the_unseen_policy_is_honoured_by_batch_and_record(unseen: str) -> None:
    contract = Contract.from_yaml(CONTRACT.format(unseen=unseen))
    frame = pd.DataFrame({"Region": pd.Categorical(["North", "West", "South"])})
    batch = validate_batch(contract, frame)
    record = RecordValidator(contract).validate({"Region": "West"})
    if unseen == "reject":
        assert not batch.passed
        assert batch.failures[0].rule == "columns.Region.categories"
        assert "'West'" in batch.failures[0].message
        assert [e.rule for e in record] == ["columns.Region.categories"]
    else:
        assert batch.passed, [f.message for f in batch.failures]
        assert record == []
    assert RecordValidator(contract).validate({"Region": "North"}) == []


def test_unseen_without_categories_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match=r"columns\.Region.*unseen applies to columns"):
        Contract.from_yaml("name: s\ncolumns:\n  Region: {dtype: string, unseen: allow}\n")
