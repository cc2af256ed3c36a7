"""The small files the DVC stages hand to each other (see dvc.yaml and docs/dvc.md).

``train`` writes the candidate file (which registered version it made); ``evaluate``
and ``promote`` read it, so they judge that version rather than whatever is latest in
a shared registry. ``promote`` writes a gate summary that ``dvc metrics`` can show.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from driftgate.jobs.train import TrainingOutcome
from driftgate.training.data import DataError

CANDIDATE_FIELDS = ("model_name", "version", "run_id", "model_uri", "data_md5", "data_path")


def write_candidate_file(outcome: TrainingOutcome, path: Path) -> Path:
    """The registered version and its DVC data version, as JSON."""
    registered = outcome.registered
    record = {
        "model_name": registered.model_name,
        "version": registered.version,
        "run_id": registered.run_id,
        "model_uri": registered.model_uri,
        "data_md5": outcome.data_md5,
        "data_path": outcome.data_path,
        "data_digest": outcome.data_digest,
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record, indent=2) + "\n")
    return path


def read_candidate_file(path: Path) -> dict[str, str]:
    """Read a file written by :func:`write_candidate_file`; DataError names what is wrong."""
    try:
        record = json.loads(path.read_text())
    except FileNotFoundError:
        raise DataError(f"candidate file not found: {path} (run `driftgate train`)") from None
    except json.JSONDecodeError as exc:
        raise DataError(f"{path}: not valid JSON: {exc}") from None
    if not isinstance(record, dict):
        raise DataError(f"{path}: expected a JSON object")
    missing = [name for name in CANDIDATE_FIELDS if not isinstance(record.get(name), str)]
    if missing:
        raise DataError(f"{path}: missing or non-string field(s): {', '.join(missing)}")
    if not re.fullmatch(r"[0-9]+", record["version"]):
        raise DataError(f"{path}: version {record['version']!r} is not a model version number")
    return record


def write_gate_summary(result, promoted: bool, path: Path) -> Path:
    """The gate's verdict as numbers and booleans (what ``dvc metrics`` shows and
    ``dvc exp show`` compares); the full report stays in gate.json."""
    summary = {
        "passed": result.passed,
        "promoted": promoted,
        "candidate": int(result.candidate),
        "checks": len(result.checks),
        "failed_checks": len(result.failures),
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(summary, indent=2) + "\n")
    return path
