"""The model formats of the allow-list, one module each (:mod:`.registry`): ``onnx``
(an MLflow ONNX model) and ``pt2`` (an MLflow PyTorch model in torch.export's format).

Importing the package imports every module of its own folder, so adding a format is
one module here (and its tests). Closed on purpose all the same: only this folder is
searched (never entry points, plugins or another folder), so a format is reviewed
code of driftgate, and :func:`register` refuses any caller outside this package.

The order formats claim a folder is each one's ``claim_order`` (onnx 10 before pt2
20, so that an ``MLmodel`` naming both ``onnx`` and ``pytorch`` is judged by the ONNX
rules, which refuse the ``pytorch`` flavour), not the order they are imported in.
"""

import importlib
import pkgutil

from driftgate.modelguard.formats.registry import (
    ModelFormat,
    format_claiming,
    format_named,
    formats,
    how_to_log_loadable,
    known_formats,
    register,
    unclaimed_findings,
)

# __path__ is this package's own folder: nothing outside it is imported. Sorted, so
# that a registration error (a tie in claim_order) always names the same module.
for _module in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
    if not _module.name.startswith("_") and _module.name != "registry":
        importlib.import_module(f"{__name__}.{_module.name}")

__all__ = [
    "ModelFormat",
    "format_claiming",
    "format_named",
    "formats",
    "how_to_log_loadable",
    "known_formats",
    "register",
    "unclaimed_findings",
]
