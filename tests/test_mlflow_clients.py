"""Every MlflowClient names its registry store, in the product and in the tests.

``MlflowClient(tracking_uri=X)`` alone takes its registry from MLflow's process-wide
registry URI when one is set, and ``registry.use_store`` sets that URI for whichever
store the process used last: registry calls would go to another store. In a test run
that is a test failing only in the full suite (the closed-loop test did, twice).
"""

from __future__ import annotations

import ast

from tests.conftest import REPO_ROOT

FOLDERS = ("driftgate", "training", "monitors", "data_contracts", "gates", "serving", "flows",
           "tests", "benchmarks", "examples", "infra")  # fmt: skip


def clients_without_registry(source: str) -> list[int]:
    lines = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call):
            continue
        name = getattr(node.func, "id", None) or getattr(node.func, "attr", None)
        if name == "MlflowClient" and "registry_uri" not in {k.arg for k in node.keywords}:
            lines.append(node.lineno)
    return lines


def test_the_check_finds_a_client_without_its_registry():
    assert clients_without_registry("MlflowClient(tracking_uri=uri)\n") == [1]
    assert clients_without_registry("MlflowClient(tracking_uri=u, registry_uri=u)\n") == []


def test_every_mlflow_client_names_its_registry():
    offenders = [
        f"{path.relative_to(REPO_ROOT)}:{line}"
        for folder in FOLDERS
        for path in sorted((REPO_ROOT / folder).rglob("*.py"))
        for line in clients_without_registry(path.read_text())
    ]
    assert not offenders, (
        "MlflowClient without registry_uri (use tests.conftest.mlflow_client "
        f"in tests): {', '.join(offenders)}"
    )
