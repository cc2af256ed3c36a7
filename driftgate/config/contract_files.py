"""Which contract file is in effect: ``data.contract`` or its newest accepted revision.

A person who accepts a contract revision (``driftgate contract revise --from-review
ID --accept``) writes it as a new file beside the current one,
``<name>.v<version>.yaml``, and never edits the old one: every version stays on disk
(and in DVC or git: ``dvc add`` or ``git add`` the new file, see docs/data_contracts.md)
and the contract each model version was trained and gated under can be read again.

``data.contract`` names the lineage; the version in effect is the one with the highest
``v<N>`` beside it (:func:`contract_in_effect`). ``load_config`` resolves it, so
training, the gate, the drift check, a retrain and the service all read the same file;
the service re-reads it with the champion alias and rebuilds its request validator when
it changed (no restart). The demo's contract ships inside the package, where nothing
should be written: its revisions go to ``<home>/contracts/``.

Plain file names only (no pandas, no pydantic models): every command loads the config.
"""

from __future__ import annotations

import re
from pathlib import Path

_REVISION_NAME = re.compile(r"^(?P<stem>.+)\.v(?P<version>[0-9]+)$")
# Where the revisions of a contract shipped inside the package go, under the home.
PACKAGED_REVISIONS_DIR = "contracts"


def lineage_stem(path: str | Path) -> str:
    """The name a contract's versions share: ``rainfall`` for ``rainfall.yaml`` and for
    ``rainfall.v3.yaml``."""
    stem = Path(path).stem
    match = _REVISION_NAME.match(stem)
    return match["stem"] if match else stem


def revision_version(path: str | Path) -> int | None:
    """``N`` of a ``<stem>.vN.yaml`` revision file, None for the lineage's first file."""
    match = _REVISION_NAME.match(Path(path).stem)
    return int(match["version"]) if match else None


def revisions_dir(contract: str | Path, home: Path, packaged_dir: Path | None) -> Path:
    """Where ``contract``'s revisions are written and looked for: beside it, or under
    ``home`` when it lies in the installed package (``packaged_dir``)."""
    folder = Path(contract).resolve().parent
    if packaged_dir is not None and folder == Path(packaged_dir).resolve():
        return home / PACKAGED_REVISIONS_DIR
    return folder


def revision_path(contract: str | Path, directory: Path, version: int) -> Path:
    """Where version ``version`` of ``contract``'s lineage is written."""
    return directory / f"{lineage_stem(contract)}.v{version}.yaml"


def newest_revision(contract: str | Path, directory: Path) -> Path | None:
    """The accepted revision of ``contract``'s lineage with the highest version in
    ``directory``, or None when none has been accepted."""
    stem, found = lineage_stem(contract), []
    if not directory.is_dir():
        return None
    for path in directory.glob(f"{stem}.v*.yaml"):
        match = _REVISION_NAME.match(path.stem)
        if match and match["stem"] == stem:
            found.append((int(match["version"]), path))
    return max(found)[1] if found else None


def contract_in_effect(contract: str | Path, directory: Path) -> Path:
    """``contract``, or its newest accepted revision in ``directory``."""
    return newest_revision(contract, directory) or Path(contract)
