"""The model formats of the allow-list, one module each (:mod:`.registry`): ``onnx``
(an MLflow ONNX model) and ``pt2`` (an MLflow PyTorch model in torch.export's format).

Closed on purpose: the modules are imported by name here, not discovered, and
:func:`register` refuses any caller outside this package. Adding a format is reviewed
code in this package (a module, its line below, its tests), never a plugin.

The order below is the order formats claim a folder: ``onnx`` first, so that an
``MLmodel`` naming both ``onnx`` and ``pytorch`` is judged by the ONNX rules, which
refuse the ``pytorch`` flavour (as before formats were modules).
"""

from driftgate.modelguard.formats import onnx, pt2  # noqa: F401 - importing registers, in order
from driftgate.modelguard.formats.registry import (
    ModelFormat,
    format_claiming,
    format_named,
    formats,
    known_formats,
    register,
    unclaimed_findings,
)

__all__ = [
    "ModelFormat",
    "format_claiming",
    "format_named",
    "formats",
    "known_formats",
    "register",
    "unclaimed_findings",
]
