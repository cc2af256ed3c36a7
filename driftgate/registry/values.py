"""How a value becomes a param, a tag or a metric in MLflow, one way for each:

- text (params, tags): :func:`tag_text`, credentials masked, cut to
  ``names.TAG_VALUE_MAX_CHARS`` where MLflow's SQL stores would refuse more;
- non-finite numbers: a NaN metric is not logged (MLflow would store a flag that its
  charts draw as a gap); in params and tags a non-finite float is spelled by ``str()``
  (``nan``, ``inf``, ``-inf``), also inside JSON-encoded lists and mappings.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

from driftgate.core.redaction import redact_credentials


def param_value(value: Any) -> str | int | float | bool:
    if isinstance(value, int | float | bool) and not _non_finite(value):
        return value
    return tag_text(value)


def tag_text(value: Any, limit: int | None = None) -> str:
    """A param or tag value: scalars by ``str()``, anything else (lists, mappings, None)
    as JSON; non-finite floats spelled ``nan``/``inf``/``-inf`` either way; credentials
    masked."""
    if isinstance(value, str | int | float | bool):
        text = str(value)
    else:
        text = json.dumps(_spell_non_finite(value))
    return redact_credentials(text)[:limit]


def _non_finite(value: Any) -> bool:
    return isinstance(value, float) and not math.isfinite(value)


def _spell_non_finite(value: Any) -> Any:
    if _non_finite(value):
        return str(value)
    if isinstance(value, Mapping):
        return {k: _spell_non_finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_spell_non_finite(v) for v in value]
    return value


def loggable_metrics(metrics: Mapping[str, float]) -> dict[str, float]:
    """The metrics to log: a NaN one is left out (see the module docstring)."""
    return {k: v for k, v in metrics.items() if not (isinstance(v, float) and math.isnan(v))}
