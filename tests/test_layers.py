"""Code tests: imports point down the layers of docs/architecture.md, never up.

The rules are read from the source files themselves (every ``import`` and ``from``
statement, including those inside functions), so a lazy import cannot hide an arrow
that runs back up. ``LAYERS`` below is the page's layer table as data, and
``test_the_layer_table_of_the_architecture_page_is_this_test`` holds the two equal, so
neither can drift from the other.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]

# Folder in the repository -> its package in the one import namespace (see setup.py).
PACKAGE_FOLDERS = {
    "driftgate": "driftgate",
    "flows": "driftgate.flows",
    "monitors": "driftgate.monitors",
    "gates": "driftgate.gates",
    "data_contracts": "driftgate.data_contracts",
    "training": "driftgate.training",
    "serving": "driftgate.serving",
}

# Layer of each package, bottom (0) to top. A module may import its own layer and below.
LAYERS: dict[str, int] = {
    "driftgate.core": 0,
    "driftgate.training": 1,
    "driftgate.monitors": 1,
    "driftgate.data_contracts": 1,
    "driftgate.gates": 1,
    "driftgate.config": 2,
    "driftgate.registry": 2,
    "driftgate.modelguard": 2,
    "driftgate.stores": 2,
    "driftgate.environment": 2,
    "driftgate.notify": 2,
    "driftgate.jobs": 3,
    "driftgate.flows": 4,
    "driftgate.serving": 4,
    "driftgate.commands": 5,
    "driftgate.cli": 5,
    "driftgate": 5,  # driftgate/__init__.py
}
LAYER_NAMES = {0: "core", 1: "domain", 2: "adapters", 3: "jobs", 4: "flows/serving", 5: "CLI"}

# Packages on one layer that must still not import each other.
FORBIDDEN_SIDEWAYS = {
    ("driftgate.serving", "driftgate.flows"),
    ("driftgate.flows", "driftgate.serving"),
}

# Third-party frameworks and the only packages allowed to import them (an owner's
# modules included: MLflow is called from every module of driftgate/registry/).
FRAMEWORK_OWNERS = {
    "prefect": ("driftgate.flows",),
    "prefect_dask": ("driftgate.flows",),
    "mlflow": ("driftgate.registry",),
    "fastapi": ("driftgate.serving",),
    "uvicorn": ("driftgate.serving",),
    # Evidently renders the people-facing report; it sits beside the statistics.
    "evidently": ("driftgate.monitors.report",),
}


def module_name(path: Path) -> str:
    relative = path.relative_to(REPO_ROOT).with_suffix("")
    parts = list(relative.parts)
    parts[0] = PACKAGE_FOLDERS[parts[0]]
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def source_modules() -> list[tuple[str, Path]]:
    modules = []
    for folder in PACKAGE_FOLDERS:
        for path in sorted((REPO_ROOT / folder).rglob("*.py")):
            modules.append((module_name(path), path))
    return modules


def imported_names(path: Path, module: str) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    names = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                target = ".".join([*base, node.module] if node.module else base)
            else:
                target = node.module or ""
            names.append((node.lineno, target))
            # ``from driftgate import jobs`` imports driftgate.jobs
            names += [(node.lineno, f"{target}.{alias.name}") for alias in node.names]
    return names


def layer_of(name: str) -> tuple[str, int] | None:
    """The most specific package of LAYERS that ``name`` is in."""
    parts = name.split(".")
    for end in range(len(parts), 0, -1):
        prefix = ".".join(parts[:end])
        if prefix in LAYERS:
            return prefix, LAYERS[prefix]
    return None


def violations(modules: list[tuple[str, Path]]) -> list[str]:
    problems = []
    for module, path in modules:
        own = layer_of(module)
        assert own is not None, f"{module} is in no layer: add it to LAYERS"
        own_package, own_layer = own
        for line, name in imported_names(path, module):
            where = (
                f"{path.relative_to(REPO_ROOT) if path.is_relative_to(REPO_ROOT) else path}:{line}"
            )
            top = name.split(".")[0]
            owners = FRAMEWORK_OWNERS.get(top)
            if owners and not any(module == o or module.startswith(o + ".") for o in owners):
                problems.append(f"{where}: {module} imports {top} (only {', '.join(owners)} may)")
            if top != "driftgate":
                continue
            target = layer_of(name)
            if target is None or name == "driftgate":
                continue
            target_package, target_layer = target
            if target_layer > own_layer:
                problems.append(
                    f"{where}: {module} ({LAYER_NAMES[own_layer]}) imports {name} "
                    f"({LAYER_NAMES[target_layer]}): an arrow up the layers"
                )
            elif (own_package, target_package) in FORBIDDEN_SIDEWAYS:
                problems.append(f"{where}: {module} imports {name}: sideways between layers")
    return problems


# The rows of docs/architecture.md's layer table, by their first cell, and their layer.
TABLE_ROWS = {
    "CLI": 5,
    "orchestration": 4,
    "service": 4,
    "jobs": 3,
    "adapters": 2,
    "domain": 1,
    "core": 0,
}


def documented_layers() -> dict[str, int]:
    """Package -> layer, as the architecture page's table lists them (`flows/`,
    `driftgate/cli.py`, ...)."""
    text = (REPO_ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    documented = {}
    for line in text.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) < 2 or cells[0] not in TABLE_ROWS:
            continue
        for path in re.findall(r"`([^`]+)`", cells[1]):
            parts = path.removesuffix("/").removesuffix(".py").split("/")
            parts[0] = PACKAGE_FOLDERS[parts[0]]
            documented[".".join(parts)] = TABLE_ROWS[cells[0]]
    return documented


def test_the_layer_table_of_the_architecture_page_is_this_test():
    listed = {package: layer for package, layer in LAYERS.items() if package != "driftgate"}
    assert documented_layers() == listed


def test_every_source_module_is_in_a_layer():
    for module, _ in source_modules():
        assert layer_of(module) is not None, f"{module}: add its package to LAYERS"


def test_imports_point_down_the_layers():
    problems = violations(source_modules())
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize(
    ("module", "imported", "expected"),
    [
        ("driftgate.monitors.drift", "driftgate.registry", "arrow up"),
        ("driftgate.gates.checks", "driftgate.flows.promote", "arrow up"),
        ("driftgate.core.redaction", "driftgate.config", "arrow up"),
        ("driftgate.serving.app", "driftgate.flows.drift_check", "sideways"),
        ("driftgate.training.train", "mlflow", "only driftgate.registry"),
        ("driftgate.jobs.promote", "prefect", "only driftgate.flows"),
    ],
)
def test_the_check_catches_an_upward_import(tmp_path, module, imported, expected):
    """The rule itself: a planted upward import (lazy, inside a function) is reported."""
    path = tmp_path / "planted.py"
    path.write_text(f"def later():\n    import {imported}\n")
    problems = violations([(module, path)])
    assert len(problems) == 1
    assert expected in problems[0] and module in problems[0]


def test_mlflow_belongs_to_every_module_of_the_registry_package_and_no_other(tmp_path):
    path = tmp_path / "planted.py"
    path.write_text("def later():\n    import mlflow.artifacts\n")
    assert violations([("driftgate.registry", path)]) == []
    assert violations([("driftgate.registry.versions", path)]) == []
    # A name that only starts like the package is not in it.
    problems = violations([("driftgate.registry_cache", path)])
    assert len(problems) == 1 and "only driftgate.registry may" in problems[0]


# -- import cycles --------------------------------------------------------------------------

# The one import cycle kept, with its reason. A reference profile holds the profile of
# the model's outputs (``ReferenceProfile.outputs``), and that holds a reference profile
# of the output columns: a composite format, loaded recursively. ``profile.py`` imports
# ``outputs.py`` only inside ``ReferenceProfile.load``.
ALLOWED_CYCLE_EDGES = {("driftgate.monitors.profile", "driftgate.monitors.outputs")}


def import_graph(modules: list[tuple[str, Path]]) -> dict[str, set[str]]:
    """Module -> the project modules it imports, anywhere in the file (functions too).

    ``from a.b import c`` depends on ``a.b.c`` when that is a module, else on ``a.b``.
    Importing a module runs its packages' ``__init__`` first; that is Python's order,
    not a dependency the importer chose, so edges to the importer's own packages are
    left out (``driftgate.monitors.stattests.kl`` -> ``driftgate.monitors``).
    """
    known = {name for name, _ in modules}
    graph: dict[str, set[str]] = {}
    for module, path in modules:
        ancestors = {module.rsplit(".", k)[0] for k in range(1, module.count(".") + 1)}
        edges = set()
        for _, name in imported_names(path, module):
            parts = name.split(".")
            for end in range(len(parts), 0, -1):
                candidate = ".".join(parts[:end])
                if candidate in known:
                    if candidate != module and candidate not in ancestors:
                        edges.add(candidate)
                    break
        graph[module] = edges
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_no_import_cycles_inside_the_packages():
    """Issue 27: cycles hidden by function-level imports (20 modules of monitors/ around
    rules.py; the review and monitor-state stores) are out, and no new one comes in."""
    graph = import_graph(source_modules())
    for importer, imported in ALLOWED_CYCLE_EDGES:
        graph[importer].discard(imported)
    found = cycles(graph)
    assert not found, "import cycles:\n" + "\n".join(" <-> ".join(c) for c in found)


def test_the_cycle_check_catches_a_lazy_cycle(tmp_path):
    first, second = tmp_path / "first.py", tmp_path / "second.py"
    first.write_text("from driftgate.monitors import second\n")
    second.write_text("def later():\n    from driftgate.monitors.first import x\n")
    modules = [("driftgate.monitors.first", first), ("driftgate.monitors.second", second)]
    assert cycles(import_graph(modules)) == [
        ["driftgate.monitors.first", "driftgate.monitors.second"]
    ]


# -- each journey once (issue 27) ------------------------------------------------------
# A job writes its journey as ``run_step("name", step_function, ...)`` calls; a flow runs
# the job with its step runner. A flow that called a step function itself, or made a
# Prefect task of its own, would be a second copy of the journey.
JOURNEY_JOBS = ("driftgate.jobs.train", "driftgate.jobs.drift_check", "driftgate.jobs.promote")
# Prefect tasks that are not steps of a journey: the Dask mapper's one task per cell.
OWN_TASK_MODULES = {"driftgate.flows.steps", "driftgate.flows.drift_check"}


def step_functions(path: Path) -> set[str]:
    """Names of the functions a job passes to ``run_step``."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return {
        node.args[1].id
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "run_step"
        and len(node.args) > 1
        and isinstance(node.args[1], ast.Name)
    }


def steps_called_outside_the_runner(
    modules: list[tuple[str, Path]], steps: dict[str, set[str]]
) -> list[str]:
    """Where a module names a journey's step function (imported, or on the job module)."""
    problems = []
    for module, path in modules:
        tree = ast.parse(path.read_text(encoding="utf-8"))
        job_aliases: dict[str, str] = {}  # local name -> job module
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module in steps:
                problems += [
                    f"{module}:{node.lineno} imports step {node.module}.{alias.name}"
                    for alias in node.names
                    if alias.name in steps[node.module]
                ]
            elif isinstance(node, ast.ImportFrom) and node.module == "driftgate.jobs":
                for alias in node.names:
                    if f"driftgate.jobs.{alias.name}" in steps:
                        job_aliases[alias.asname or alias.name] = f"driftgate.jobs.{alias.name}"
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name in steps and alias.asname:
                        job_aliases[alias.asname] = alias.name
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id in job_aliases
                and node.attr in steps[job_aliases[node.value.id]]
            ):
                problems.append(
                    f"{module}:{node.lineno} calls step {job_aliases[node.value.id]}.{node.attr}"
                )
        if module not in OWN_TASK_MODULES:
            problems += [
                f"{module}:{node.lineno} makes a Prefect task of its own"
                for node in ast.walk(tree)
                if isinstance(node, ast.ImportFrom)
                and node.module == "prefect"
                and any(alias.name == "task" for alias in node.names)
            ]
    return problems


def journey_steps() -> dict[str, set[str]]:
    """Each journey job's step functions, and under the module a step lives in when the
    job imports it (the drift check's ``record`` is ``jobs.window_record.record``), so
    that a flow importing a step from its own module is caught too."""
    by_module = dict(source_modules())
    steps = {job: step_functions(by_module[job]) for job in JOURNEY_JOBS}
    for job in JOURNEY_JOBS:
        for node in ast.walk(ast.parse(by_module[job].read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("driftgate."):
                for alias in node.names:
                    if (alias.asname or alias.name) in steps[job]:
                        steps.setdefault(node.module, set()).add(alias.name)
    return steps


def test_each_job_runs_its_journey_through_the_step_runner():
    steps = journey_steps()
    assert steps["driftgate.jobs.train"] == {
        "prepare_data",
        "fit_model",
        "evaluate_model",
        "register_model",
    }
    assert {"read", "validate", "summarise", "decide", "record", "act", "report"} == steps[
        "driftgate.jobs.drift_check"
    ]
    assert steps["driftgate.jobs.promote"] == {"evaluate_gates", "write_gate_reports", "promote"}


def test_flows_run_the_jobs_journeys_and_never_a_step_of_their_own():
    flows = [(m, p) for m, p in source_modules() if m.startswith("driftgate.flows")]
    problems = steps_called_outside_the_runner(flows, journey_steps())
    assert not problems, "a flow reimplements a journey:\n" + "\n".join(problems)


def test_the_journey_check_catches_a_flow_calling_a_step(tmp_path):
    flow = tmp_path / "train.py"
    flow.write_text(
        "from prefect import flow, task\n"
        "from driftgate.jobs import train as job\n"
        "from driftgate.jobs.promote import evaluate_gates\n"
        "from driftgate.jobs.window_record import record\n"
        "def f(config):\n    return job.fit_model(config)\n"
    )
    problems = steps_called_outside_the_runner([("driftgate.flows.train", flow)], journey_steps())
    assert problems == [
        "driftgate.flows.train:3 imports step driftgate.jobs.promote.evaluate_gates",
        "driftgate.flows.train:4 imports step driftgate.jobs.window_record.record",
        "driftgate.flows.train:6 calls step driftgate.jobs.train.fit_model",
        "driftgate.flows.train:1 makes a Prefect task of its own",
    ]
