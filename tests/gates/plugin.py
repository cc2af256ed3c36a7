"""The worked example of docs/gates.md ("Adding a check") as a user's own module."""

from __future__ import annotations

import contextlib
import re
import sys
from collections.abc import Iterator
from pathlib import Path

from driftgate.gates.checks import CHECKS, import_check_modules, unregister

REPO_ROOT = Path(__file__).resolve().parents[2]


def docs_example() -> str:
    """The Python block of docs/gates.md's "Adding a check" section."""
    text = (REPO_ROOT / "docs" / "gates.md").read_text()
    section = text[text.index("#### Adding a check") :]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


@contextlib.contextmanager
def docs_example_registered(folder: Path) -> Iterator[list[str]]:
    """Write the example into a package ``my_checks`` in ``folder``, import the package
    the way driftgate.gates.checks imports its own, and yield the modules it imported;
    afterwards the registry and ``sys.modules`` are as before."""
    before = dict(CHECKS)
    package = folder / "my_checks"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "prediction_spread.py").write_text(docs_example())
    sys.path.insert(0, str(folder))
    try:
        yield import_check_modules("my_checks")
    finally:
        sys.path.remove(str(folder))
        for name in [m for m in sys.modules if m == "my_checks" or m.startswith("my_checks.")]:
            del sys.modules[name]
        for name in [n for n in CHECKS if n not in before]:
            unregister(name)
