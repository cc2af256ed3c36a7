"""Code tests: jobs and flows open stores only through ``driftgate.stores.factories``.

Why: a store opened past the factories drifts from the config (another URL, another
``sqlite_synchronous``) and hides how many connections a journey opens (issue 27). The
store classes are read from ``driftgate/stores/`` itself, so a new store is covered
without editing this file.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
STORES = REPO_ROOT / "driftgate" / "stores"
# Callers that must go through the factories.
GUARDED_FOLDERS = (REPO_ROOT / "driftgate" / "jobs", REPO_ROOT / "flows")
STORE_CLASS = re.compile(r"(Store|Source)$")


def store_classes() -> set[str]:
    """Every class under driftgate/stores/ named like a store (``...Store``, ``...Source``)."""
    names = set()
    for path in STORES.rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        names |= {
            node.name
            for node in ast.walk(tree)
            if isinstance(node, ast.ClassDef) and STORE_CLASS.search(node.name)
        }
    return names


def direct_constructions(source: str, classes: set[str]) -> list[tuple[int, str]]:
    """``(line, class)`` of each call that constructs one of ``classes`` by name
    (``SqlSampleStore(url)``, ``samples.SqlSampleStore(url)``)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)
        if name in classes:
            found.append((node.lineno, name))
    return found


def test_store_classes_are_found():
    classes = store_classes()
    assert {"SqlSampleStore", "LabelStore", "ControlStore", "FileSampleSource"} <= classes
    assert "TableStore" in classes  # a base class: constructing it directly is as wrong


def test_jobs_and_flows_open_stores_only_through_the_factories():
    classes = store_classes()
    problems = [
        f"{path.relative_to(REPO_ROOT)}:{line}: {name}(...) (use driftgate.stores.factories)"
        for folder in GUARDED_FOLDERS
        for path in sorted(folder.rglob("*.py"))
        for line, name in direct_constructions(path.read_text(encoding="utf-8"), classes)
    ]
    assert problems == []


def test_the_check_catches_a_direct_construction():
    source = (
        "from driftgate.stores import samples\n"
        "def window(url):\n"
        "    from driftgate.stores.labels import LabelStore\n"
        "    return samples.SqlSampleStore(url), LabelStore(url)\n"
        "def typed(store: LabelStore) -> LabelStore:\n"
        "    return store\n"
    )
    assert direct_constructions(source, store_classes()) == [
        (4, "SqlSampleStore"),
        (4, "LabelStore"),
    ]
