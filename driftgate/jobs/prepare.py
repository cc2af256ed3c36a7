"""The prepare job (DVC stage ``prepare``): source → validated splits on disk.

Loads ``data.source``, cuts it in time order exactly as training does, validates the
reference period against the data contract with Great Expectations and, only when the
contract holds, writes ``raw.parquet`` and the four split files. Training, evaluation
and the gate then read those files (``data.prepared``), and DVC versions them.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from driftgate.config import ProjectConfig
from driftgate.data_contracts.breach import ContractBreach
from driftgate.jobs.data import prepare_data
from driftgate.training.prepared import PreparedData, file_md5, save_prepared

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class PrepareOutcome:
    files: dict[str, Path]  # raw, train, validation, test, production
    rows: dict[str, int]
    train_md5: str  # what DVC records for train.parquet in dvc.lock
    contract_reports: dict[str, Path]  # json, markdown; empty without a contract


def run_prepare(config: ProjectConfig, out_dir: Path, report_dir: Path) -> PrepareOutcome:
    """Write the validated splits of ``data.source`` into ``out_dir``.

    The contract's report goes to ``report_dir`` whether it passes or not; a breach
    raises ContractBreach before any data file is written, so a DVC stage fails and
    nothing broken can be pushed.
    """
    source_only = config.model_copy(
        update={"data": config.data.model_copy(update={"prepared": None})}
    )
    data = prepare_data(source_only, enforce_contract=False)
    reports = _write_contract_reports(data, report_dir)
    if data.contract_result is not None and not data.contract_result.passed:
        raise ContractBreach(config.data.source, data.contract_result)
    raw = pd.concat([data.splits.reference, data.splits.production])
    files = save_prepared(raw, data.splits, out_dir)
    rows = {name: len(getattr(data.splits, name)) for name in files if name != "raw"}
    rows["raw"] = len(raw)
    log.info("prepared %s into %s: %s", config.data.source, out_dir, rows)
    return PrepareOutcome(files, rows, file_md5(files["train"]), reports)


def _write_contract_reports(data: PreparedData, folder: Path) -> dict[str, Path]:
    from driftgate.data_contracts import render_markdown

    result = data.contract_result
    if result is None:
        return {}
    folder.mkdir(parents=True, exist_ok=True)
    files = {"json": folder / "data_contract.json", "markdown": folder / "data_contract.md"}
    files["json"].write_text(json.dumps(result.to_dict(), indent=2, default=str) + "\n")
    files["markdown"].write_text(render_markdown(result))
    return files
