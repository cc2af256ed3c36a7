"""Issue 27: a model format is one module of driftgate/modelguard/formats/, no other
file edited.

The toy ``logistic_json`` format is the Python block of docs/architecture.md's "Adding
a model format" (read out of the doc, so the doc cannot rot). Formats take no plugin,
so the block goes where a reviewed format lives, in driftgate's own package: in a copy
of its source tree under tmp_path (the repository's package is never touched), which
the real ``driftgate adopt`` imports first, in a subprocess. The same command on the
same copy before the module is written refuses the folder: the module alone is what
makes the model loadable.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from tests.conftest import REPO_ROOT
from tests.driftgate.test_cli import DRIFTGATE
from tests.test_layers import PACKAGE_FOLDERS

FEATURES = ["x0", "x1", "x2", "x3"]
COEF, INTERCEPT = [2.0, -1.0, 0.5, 0.0], 0.25
MODULE = "driftgate.modelguard.formats.logistic_json"


def docs_example() -> str:
    """The first Python block after docs/architecture.md's "Adding a model format"."""
    text = (REPO_ROOT / "docs" / "architecture.md").read_text()
    return re.search(r"#### Adding a model format\n.*?```python\n(.*?)```", text, re.S)[1]


def copy_of_driftgate(root: Path) -> Path:
    """driftgate's source tree laid out as its one import namespace (setup.py maps the
    top-level folders monitors/, gates/ ... to driftgate.monitors ...), under ``root``."""
    for folder, package in PACKAGE_FOLDERS.items():
        target = root.joinpath(*package.split("."))
        shutil.copytree(REPO_ROOT / folder, target, ignore=shutil.ignore_patterns("__pycache__"))
    return root / "driftgate"


def save_model(path, mlflow_model, coef, intercept, signature):
    """The writer of a ``logistic_json`` model, for ``mlflow.models.Model.log`` (MLflow's
    custom-flavour API): the coefficients as JSON, the format's own flavour, and a
    python_function flavour whose loader is the format's module."""
    import mlflow

    os.makedirs(path)
    mlflow_model.signature = signature
    Path(path, "coefficients.json").write_text(json.dumps({"coef": coef, "intercept": intercept}))
    mlflow_model.add_flavor("logistic_json", data="coefficients.json")
    mlflow.pyfunc.add_to_model(mlflow_model, loader_module=MODULE, data="coefficients.json")
    mlflow_model.save(os.path.join(path, "MLmodel"))


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    """A project with a ``logistic_json`` model logged by a run (not yet registered),
    its labelled reference data, and a copy of driftgate's package."""
    import mlflow
    from mlflow.models import Model, ModelSignature
    from mlflow.types import Schema, TensorSpec

    from driftgate import registry
    from driftgate.config import load_config

    root = tmp_path_factory.mktemp("format-project")
    state = root / "state"
    rng = np.random.default_rng(0)
    frame = pd.DataFrame(rng.normal(size=(400, 4)), columns=FEATURES)
    logits = frame[FEATURES].to_numpy() @ np.asarray(COEF) + INTERCEPT
    frame["y"] = (rng.random(400) < 1 / (1 + np.exp(-logits))).astype(int)
    frame.to_csv(root / "reference.csv", index=False)
    (root / "driftgate.yaml").write_text(
        f"home: state\nmodel:\n  name: logistic\ntracking:\n"
        f"  uri: sqlite:///{state / 'mlflow.db'}\n"
        f"  artifact_location: {(state / 'mlartifacts').as_uri()}\n"
        "  experiment: elsewhere\ndata:\n  source: reference.csv\n  target: y\n"
    )
    registry.connect(load_config(root / "driftgate.yaml").tracking)
    mlflow.set_experiment("elsewhere")
    signature = ModelSignature(inputs=Schema([TensorSpec(np.dtype(np.float32), (-1, 4))]))
    with mlflow.start_run() as run:
        Model.log(
            None, name="model", flavor=SimpleNamespace(save_model=save_model),
            flavor_name="logistic_json", signature=signature, coef=COEF, intercept=INTERCEPT,
        )  # fmt: skip
    package = copy_of_driftgate(root / "src")
    return SimpleNamespace(root=root, package=package, run_id=run.info.run_id)


def driftgate(project, *args: str) -> subprocess.CompletedProcess:
    """The installed ``driftgate`` command, importing the copy of the package first (the
    editable install's finder comes after PYTHONPATH; formats_seen checks it)."""
    env = {**os.environ, "PYTHONPATH": str(project.package.parent), "NO_COLOR": "1",
           "COLUMNS": "200"}  # fmt: skip
    return subprocess.run(
        [DRIFTGATE, *args], cwd=project.root, capture_output=True, text=True, timeout=300,
        env=env,
    )  # fmt: skip


def formats_seen(project) -> tuple[Path, list[str], str]:
    """Where a subprocess like the CLI's imports the formats package from (the copy, not
    the repository), the formats it registered, in the order they claim a folder, and
    the advice every refusal ends with."""
    code = (
        "import driftgate.modelguard.formats as f; "
        "print(f.__file__, *(m.name for m in f.formats())); "
        "print(f.how_to_log_loadable())"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=project.root, capture_output=True, text=True,
        timeout=120, env={**os.environ, "PYTHONPATH": str(project.package.parent)},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    listing, advice = done.stdout.splitlines()
    where, *names = listing.split()
    return Path(where), names, advice


def test_a_model_format_from_the_docs_claims_its_folder_through_the_cli(project):
    """One module, no other file: without it ``driftgate adopt`` refuses the folder no
    format claims (exit 3, naming the known formats); with it the same command loads
    the model through the format's loader and adopts it, its metrics on the reference."""
    formats = project.package / "modelguard" / "formats"
    assert formats_seen(project)[:2] == (formats / "__init__.py", ["onnx", "pt2"])
    adopt = ("adopt", f"runs:/{project.run_id}/model", "-r", "reference.csv",
             "-c", "driftgate.yaml")  # fmt: skip

    refused = driftgate(project, *adopt)
    assert refused.returncode == 3, refused.stdout[-2000:] + refused.stderr[-3000:]
    assert "Traceback" not in refused.stderr
    assert (
        "MLmodel: flavours logistic_json, python_function: not a model format driftgate "
        "loads (known: onnx (flavour 'onnx'), pt2 (flavour 'pytorch'))"
    ) in refused.stderr

    (formats / "logistic_json.py").write_text(docs_example())
    # Found by the package on its own; imported first (by name) yet asked last (claim_order).
    _, names, advice = formats_seen(project)
    assert names == ["onnx", "pt2", "logistic_json"]
    # What a refusal tells the user to do now names the new format too.
    assert advice.endswith(", a logistic regression as JSON coefficients (MLmodel flavour "
                           "'logistic_json')"), advice  # fmt: skip
    adopted = driftgate(project, *adopt)
    assert adopted.returncode == 0, adopted.stdout[-2000:] + adopted.stderr[-3000:]
    assert "adopted models:/logistic/1" in adopted.stdout
    tags = run_tags(project)
    # The run records the format that claimed the folder: only the copy's module knows it.
    assert tags["env.model_format"] == "logistic_json"
    assert tags["driftgate.adopted"] == "true"
    metrics = run_metrics(project)
    assert metrics["reference_roc_auc"] > 0.8, metrics


def run_tags(project) -> dict:
    return client(project).get_run(project.run_id).data.tags


def run_metrics(project) -> dict:
    return client(project).get_run(project.run_id).data.metrics


def client(project):
    from mlflow import MlflowClient

    uri = f"sqlite:///{project.root / 'state' / 'mlflow.db'}"
    return MlflowClient(tracking_uri=uri, registry_uri=uri)
