"""Monitor kinds, one module each (:mod:`monitors.kinds.registry`): contract, the
model's outputs (prediction drift, performance estimate), realized performance,
traffic, and the drift statistics (asked last: their names have no form). Importing
the package imports every module in it, so adding a kind is one module."""

import importlib
import pkgutil

from driftgate.monitors.kinds import (  # noqa: F401 - importing registers each kind, in order
    contract,
    drift,
    outputs,
    performance,
    traffic,
)
from driftgate.monitors.kinds.registry import (
    KINDS,
    LabelledOutputs,
    MonitorKind,
    WindowEvidence,
    evaluate_all,
    kind_of,
    known_syntax,
    register,
)

for _module in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
    if not _module.name.startswith("_") and _module.name != "registry":
        importlib.import_module(f"{__name__}.{_module.name}")

__all__ = [
    "KINDS",
    "LabelledOutputs",
    "MonitorKind",
    "WindowEvidence",
    "evaluate_all",
    "kind_of",
    "known_syntax",
    "register",
]
