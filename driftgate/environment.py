"""What a model was built with: interpreter, torch, device, key packages, git commit.

Recorded on every training run so a model version can be checked against the
serving environment later (the promotion gate's environment check reads these).
"""

from __future__ import annotations

import platform
import subprocess
import sys
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

TRACKED_PACKAGES = (
    "torch",
    "numpy",
    "pandas",
    "scipy",
    "scikit-learn",
    "mlflow",
    "prefect",
    "great-expectations",
    "evidently",
    "dvc",
    "driftgate",
)


def git_commit(cwd: Path | None = None) -> str:
    """HEAD's commit, suffixed ``-dirty`` when tracked files changed; ``unknown`` outside git."""
    try:
        head = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=cwd, capture_output=True, text=True, timeout=5
        )
        if head.returncode != 0:
            return "unknown"
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=5,
        )
        return head.stdout.strip() + ("-dirty" if dirty.stdout.strip() else "")
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"


def describe_environment(cwd: Path | None = None) -> dict[str, str]:
    import torch

    info = {
        "python": platform.python_version(),
        "python_implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "executable": sys.executable,
        "device": "cuda" if torch.cuda.is_available() else "cpu",
        "torch_threads": str(torch.get_num_threads()),
        "git_commit": git_commit(cwd),
    }
    for package in TRACKED_PACKAGES:
        try:
            info[package] = version(package)
        except PackageNotFoundError:
            info[package] = "not installed"
    return info
