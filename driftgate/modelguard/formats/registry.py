"""The model formats driftgate loads, one module each, and the closed list of them.

A :class:`ModelFormat` knows how it is recognised (the ``MLmodel`` flavour that
claims a folder for it), its rules (exactly which flavours, each one's keys, the
loader module and data path) and how its folder is judged file by file; and the plain
facts other modules read instead of testing a format's name (:mod:`driftgate.registry`
unwraps a pyfunc that answers with named outputs, ``driftgate adopt`` records the
format's runtime versions, and whether torch runs it).

**The list is closed.** Which format may be loaded is a security decision: each is
reviewed code in this package, never a plugin. :func:`register` refuses a caller that
is not a module of :mod:`driftgate.modelguard.formats`, and the package imports the
modules of its own folder only (never entry points, ``gates.yaml`` plugins or another
folder): a module there is driftgate's own code, as trusted and as reviewed as
``pt2.py``, since whoever can write that folder can already edit ``pt2.py``. The caller
check stops a plugin registering by mistake or by design of a well-meaning extension;
code already running in the process could patch anything, and that is not what it
guards against.

The order formats are asked to claim a folder is each format's ``claim_order``, not
the order their modules happen to be imported in (the package finds its modules, so
that order is not written anywhere a reviewer reads): two formats with the same
``claim_order`` are refused, so the order is never left to chance.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType

from driftgate.modelguard.common import (
    MLMODEL,
    Finding,
    FlavourCheck,
    content_findings,
    mlmodel_findings,
    parse_text,
)

# The package whose modules alone may register a format.
PACKAGE = __name__.rpartition(".")[0]


class ModelFormat:
    """One model format: how it is recognised, its rules, how its folder is judged."""

    name: str  # what model_format() answers: "pt2", "onnx"
    description: str  # "an MLflow ONNX model": in "not an allowed file of ..."
    marker: str  # the MLmodel flavour that claims a folder for this format
    loader_module: str  # python_function.loader_module, the only one that may load
    data: str  # python_function.data: the file or folder that loader reads
    # Formats are asked to claim a folder lowest first (onnx 10, pt2 20): a folder naming
    # two formats' markers is judged by the first, whose rules refuse the other's flavour.
    # Required, and unique among the formats (register refuses a tie, naming both).
    claim_order: int

    # What other modules read instead of the format's name:
    # MLflow's pyfunc of this format answers a dict of named outputs for an array
    # (registry.load_checked_model keeps the first, as a torch model answers).
    outputs_by_name: bool = False
    # torch runs the model: the environment gate check compares torch's version.
    runs_on_torch: bool = True
    # Versions an adopted model's run records (env.<key>), as key -> (flavour, field)
    # of its MLmodel: the runtime the model was logged with.
    runtime_versions: Mapping[str, tuple[str, str]] = MappingProxyType({})
    # Also judges a folder no format claims (beside the finding that refuses it): at
    # most one format, whose findings tell the user what the folder lacks.
    judges_unclaimed: bool = False
    # How a user logs a model of this format, for the advice in every refusal ("log a
    # PyTorch model with mlflow.pytorch.log_model ..."); without it the advice names the
    # format's description and flavour.
    how_to_log: str = ""

    def flavour_checks(self) -> dict[str, FlavourCheck]:
        """Exactly the MLmodel flavours of this format, each with its rules, in the
        order they are checked (the marker first)."""
        raise NotImplementedError

    def inspect_files(self, files: dict[str, Path]) -> list[Finding]:
        """Every reason the files of a folder this format claims are refused."""
        raise NotImplementedError

    @property
    def flavours(self) -> tuple[str, ...]:
        return tuple(sorted(self.flavour_checks()))

    def claims(self, flavours: Mapping) -> bool:
        """Whether an MLmodel naming ``flavours`` is judged by this format's rules."""
        return self.marker in flavours

    def mlmodel_findings(self, name: str, path: Path) -> list[Finding]:
        """``MLmodel`` as text, then against this format's flavour rules."""
        return parse_text(name, path, "yaml") or mlmodel_findings(path, self.flavour_checks())

    def __repr__(self) -> str:
        return f"<model format {self.name} (flavour {self.marker})>"


# Registered formats by name, in claim order (lowest claim_order first).
_FORMATS: dict[str, ModelFormat] = {}


def register(model_format: ModelFormat) -> ModelFormat:
    """Add ``model_format`` to the allow-list; only a module of this package may."""
    caller = sys._getframe(1).f_globals.get("__name__", "")
    if not caller.startswith(f"{PACKAGE}."):
        raise PermissionError(
            f"{caller or 'unknown module'} may not register model format "
            f"{getattr(model_format, 'name', model_format)!r}: the model formats are a closed "
            f"list, reviewed code in {PACKAGE} (a format decides what may be loaded)"
        )
    if model_format.name in _FORMATS:
        raise ValueError(f"model format {model_format.name!r} registered twice")
    order = getattr(model_format, "claim_order", None)
    if not isinstance(order, int) or isinstance(order, bool):
        raise ValueError(
            f"model format {model_format.name!r}: claim_order must be an int (the order "
            f"formats claim a folder, lowest first), not {order!r}"
        )
    tied = [f.name for f in _FORMATS.values() if f.claim_order == order]
    if tied:
        raise ValueError(
            f"model formats {tied[0]!r} and {model_format.name!r} have the same claim_order "
            f"{order}: which claims a folder naming both flavours would be left to chance"
        )
    taken = [f.name for f in _FORMATS.values() if f.marker == model_format.marker]
    if taken:
        raise ValueError(
            f"model format {model_format.name!r}: flavour {model_format.marker!r} already "
            f"claims folders for {taken[0]!r}"
        )
    if model_format.judges_unclaimed and any(f.judges_unclaimed for f in _FORMATS.values()):
        raise ValueError(
            f"model format {model_format.name!r}: another format judges unclaimed folders"
        )
    _FORMATS[model_format.name] = model_format
    # Kept in claim order, whatever order the modules were imported in.
    ordered = sorted(_FORMATS.values(), key=lambda f: f.claim_order)
    _FORMATS.clear()
    _FORMATS.update((f.name, f) for f in ordered)
    return model_format


def formats() -> tuple[ModelFormat, ...]:
    """The registered formats, in the order they are asked to claim a folder."""
    return tuple(_FORMATS.values())


def format_named(name: str) -> ModelFormat:
    try:
        return _FORMATS[name]
    except KeyError:
        raise ValueError(f"no model format {name!r} (known: {known_formats()})") from None


def format_claiming(flavours: Mapping | None) -> ModelFormat | None:
    """The first format whose marker is among ``flavours`` (an MLmodel's), or None.

    First, because a folder may name the markers of two: it is judged by the first
    format's rules, which refuse the other format's flavour, so naming a second
    flavour never widens what loads.
    """
    if not isinstance(flavours, Mapping):
        return None
    return next((f for f in _FORMATS.values() if f.claims(flavours)), None)


def how_to_log_loadable() -> str:
    """What every refusal advises: how to log a model that some format loads, the format
    of unclaimed folders (the default) first, then in claim order."""
    ordered = sorted(_FORMATS.values(), key=lambda f: (not f.judges_unclaimed, f.claim_order))
    ways = [f.how_to_log or f"{f.description} (MLmodel flavour {f.marker!r})" for f in ordered]
    return f"driftgate loads nothing that unpickles: log {', '.join(ways)}"


def known_formats() -> str:
    """``onnx (flavour 'onnx'), pt2 (flavour 'pytorch')``: for a refusal."""
    return ", ".join(f"{f.name} (flavour {f.marker!r})" for f in _FORMATS.values())


def unclaimed_findings(files: dict[str, Path], flavours: Mapping | None) -> list[Finding]:
    """A folder no format claims: refused, naming the formats there are, and held to the
    rules of the format that judges unclaimed folders (pt2's, as before formats were
    modules: their findings say what such a folder lacks, and name its pickles)."""
    named = f"flavours {', '.join(sorted(map(str, flavours)))}" if flavours else "no flavours"
    findings = [
        Finding(MLMODEL, f"{named}: not a model format driftgate loads (known: {known_formats()})")
    ]
    fallback = next((f for f in _FORMATS.values() if f.judges_unclaimed), None)
    if fallback is not None:
        return findings + fallback.inspect_files(files)
    # No format's rules to say what the files should be: at least name their pickles.
    for name, path in files.items():
        findings += [f for f in content_findings(name, path) if f.pickled]
    return findings
