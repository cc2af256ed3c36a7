"""``driftgate prepare`` and ``driftgate evaluate``: the DVC pipeline's own stages.

Registered on the main app with ``app.command()(prepare)``. ``train`` and ``promote``
(in :mod:`driftgate.cli`) take the same ``--prepared`` and ``--candidate-file``
options, so every stage of dvc.yaml is one driftgate command.

Exit codes: 0 done, 1 the data breaks its contract (prepare), 2 bad usage,
configuration or input, 3 the registry failed.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer

from driftgate.commands.options import ConfigOption, setup_logging

if TYPE_CHECKING:
    from driftgate.config import ProjectConfig

PreparedOption = typer.Option(
    None,
    "--prepared",
    help="Folder written by `driftgate prepare`; read its splits instead of splitting "
    "data.source (default: data.prepared in the config).",
    file_okay=False,
)
CandidateFileOption = typer.Option(
    None,
    "--candidate-file",
    help="JSON naming the registered version (written by `driftgate train --candidate-file`).",
    dir_okay=False,
)


def with_prepared(config: ProjectConfig, prepared: Path | None) -> ProjectConfig:
    """``config`` reading the prepared splits in ``prepared`` (relative to the cwd)."""
    if prepared is not None:
        config.data = config.data.model_copy(update={"prepared": str(prepared.resolve())})
    return config


def _folder_option(default: str, flag: str, help: str):
    return typer.Option(Path(default), flag, help=help, file_okay=False)


def prepare(
    out_dir: Path = _folder_option("data", "--out", "Folder for raw.parquet and the splits."),
    report_dir: Path = _folder_option(
        "reports/prepare", "--report-dir", "Where the data contract report goes."
    ),
    config_path: Path | None = ConfigOption,
    verbose: bool = typer.Option(False, "--verbose", "-v"),
) -> None:
    """Load data.source, validate it against its contract (GX), write the splits.

    Nothing is written to --out when the contract breaks (exit 1).
    """
    setup_logging(verbose)
    from driftgate.config import load_config
    from driftgate.jobs.prepare import run_prepare

    outcome = run_prepare(load_config(config_path), out_dir, report_dir)
    for name, path in outcome.files.items():
        typer.echo(f"  {name:<11}{outcome.rows[name]:>6} rows  {path}")
    for kind, path in outcome.contract_reports.items():
        typer.echo(f"  contract   {kind:<9}{path}")
    typer.echo(f"train split md5 (as in dvc.lock): {outcome.train_md5}")


def evaluate(
    candidate_file: Path | None = CandidateFileOption,
    model_uri: str | None = typer.Option(
        None, "--model-uri", help="models:/NAME/VERSION (instead of --candidate-file)."
    ),
    prepared: Path | None = PreparedOption,
    metrics_file: Path = typer.Option(
        Path("metrics/evaluate.json"),
        "--metrics",
        help="Metrics JSON for `dvc metrics`.",
        dir_okay=False,
    ),
    plots_dir: Path = _folder_option(
        "plots", "--plots", "Folder for roc.csv and calibration.csv (`dvc plots`)."
    ),
    split: str = typer.Option("test", "--split", help="Split the curves describe: val or test."),
    bins: int = typer.Option(10, "--bins", min=1, help="Calibration bins."),
    config_path: Path | None = ConfigOption,
    verbose: bool = typer.Option(False, "--verbose", "-v"),
) -> None:
    """Score a registered version (through pyfunc) on validation and test; write
    metrics and ROC / calibration tables."""
    setup_logging(verbose)
    if (candidate_file is None) == (model_uri is None):
        raise typer.BadParameter("give exactly one of --candidate-file and --model-uri")
    from driftgate.config import load_config

    config = with_prepared(load_config(config_path), prepared)
    from driftgate.jobs.evaluate import evaluate_candidate, write_evaluation
    from driftgate.jobs.pipeline import read_candidate_file

    if candidate_file is not None:
        model_uri = read_candidate_file(candidate_file)["model_uri"]
    if split not in ("val", "test"):
        raise typer.BadParameter(f"--split must be val or test, got '{split}'")
    evaluation = evaluate_candidate(config, model_uri, curve_split=split, bins=bins)
    files = write_evaluation(evaluation, metrics_file, plots_dir)
    typer.echo(f"Evaluated {model_uri}")
    for prefix, values in evaluation.metrics.items():
        if "roc_auc" not in values:  # multiclass / regression: the task's metrics
            shown = "  ".join(f"{k} {v:.4f}" for k, v in values.items() if k != "rows")
            typer.echo(f"  {prefix:<5}{shown}")
            continue
        typer.echo(
            f"  {prefix:<5}accuracy {values['accuracy']:.4f}  ROC AUC {values['roc_auc']:.4f}  "
            f"log loss {values['log_loss']:.4f}  Brier {values['brier']:.4f}  "
            f"ECE {values['expected_calibration_error']:.4f}"
        )
    for kind, path in files.items():
        typer.echo(f"  {kind:<12}{path}")
