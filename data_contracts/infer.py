"""Scaffold a contract from data, with margins, for a person to review and edit.

What is inferred, per column:

- ``dtype`` from the pandas dtype (``object`` columns holding only strings are
  ``string``; text that parses entirely as dates is ``datetime``; a pandas
  ``category`` is the type of its levels, ``string`` or ``int``).
- nulls: none seen gives ``nullable: false``; otherwise ``max_null_share`` is the seen
  share times 1.5 plus one point, rounded up to a whole percent.
- numeric ranges: from robust quantiles, not the extremes, so a single corrupt value
  (the demo data has a sea-level pressure 94 standard deviations out) does not set a
  useless bound. The range is ``[q_low - margin * span, q_high + margin * span]`` with
  ``span = q_high - q_low``, rounded outwards; if the inference data itself has values
  outside, ``max_out_of_range_share`` is twice their share, rounded up to 0.1%.
- categories: a pandas ``category`` column lists all its declared levels; int and
  string columns with few distinct values list them (an int column with at most
  ``max_categories`` values gets categories instead of a range).
- ``unique: true`` for string columns whose values are all distinct (ids). Never for
  datetime columns: distinct event times are a property of the file inferred on, and a
  retrain's data holds production records whose time is their request's, shared by every
  record of a multi-record request.
- rows: ``min: 1``. Columns named in ``optional`` get ``required: false``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import numpy as np
import pandas as pd

from driftgate.data_contracts.model import ColumnSpec, Contract, RowCountSpec

DEFAULT_QUANTILE = 0.001
DEFAULT_MARGIN = 0.25
DEFAULT_MAX_CATEGORIES = 20


def infer_contract(
    frame: pd.DataFrame,
    name: str,
    *,
    optional: Iterable[str] = (),
    margin: float = DEFAULT_MARGIN,
    quantile: float = DEFAULT_QUANTILE,
    max_categories: int = DEFAULT_MAX_CATEGORIES,
    description: str | None = None,
) -> Contract:
    """A contract that ``frame`` passes, with room for ordinary variation.

    Args:
        frame: Data representative of what the contract should accept.
        name: The data set's name.
        optional: Columns that may be absent (e.g. the label, absent at serving time).
        margin: Widening of numeric ranges, as a fraction of the inner quantile span.
        quantile: Lower quantile for ranges (the upper one is ``1 - quantile``).
        max_categories: Most distinct values for a column to get ``categories``.
        description: Free text kept in the contract.

    Raises:
        ValueError: ``frame`` has no columns, or ``optional`` names unknown columns.
    """
    if frame.shape[1] == 0:
        raise ValueError("cannot infer a contract from a frame without columns")
    optional = set(optional)
    unknown = optional - {str(c) for c in frame.columns}
    if unknown:
        raise ValueError(f"optional column(s) not in the data: {', '.join(sorted(unknown))}")
    columns = {
        str(column): _infer_column(
            frame[column],
            required=str(column) not in optional,
            margin=margin,
            quantile=quantile,
            max_categories=max_categories,
        )
        for column in frame.columns
    }
    return Contract(
        name=name,
        description=description,
        rows=RowCountSpec(min=1),
        extra_columns="forbid",
        columns=columns,
    )


def _infer_column(
    series: pd.Series, *, required: bool, margin: float, quantile: float, max_categories: int
) -> ColumnSpec:
    dtype = _infer_dtype(series)
    values = series.dropna()
    null_share = 1.0 - len(values) / len(series) if len(series) else 0.0
    spec: dict = {"dtype": dtype, "required": required}
    if null_share == 0.0:
        spec["nullable"] = False
    else:
        spec["max_null_share"] = null_share_bound(null_share)
    distinct = values.nunique() if len(values) else 0
    if isinstance(series.dtype, pd.CategoricalDtype):
        # A pandas category declares its levels: all of them are the categories, however
        # many, and the column is not an id however distinct its values.
        levels = series.cat.categories
        spec["categories"] = (
            [int(v) for v in levels] if dtype == "int" else [str(v) for v in levels]
        )
        return ColumnSpec(**spec)
    if dtype == "int" and 0 < distinct <= max_categories:
        spec["categories"] = sorted(int(v) for v in values.unique())
    elif dtype in ("float", "int") and len(values):
        spec.update(infer_range(values, dtype, margin, quantile))
    elif dtype == "string" and 0 < distinct <= max_categories:
        spec["categories"] = sorted(str(v) for v in values.unique())
    if dtype == "string" and len(values) > 1 and distinct == len(values):
        spec["unique"] = True
    return ColumnSpec(**spec)


def _infer_dtype(series: pd.Series) -> str:
    if isinstance(series.dtype, pd.CategoricalDtype):
        levels = series.cat.categories
        return "int" if pd.api.types.is_integer_dtype(levels.dtype) else "string"
    if pd.api.types.is_bool_dtype(series):
        return "bool"
    if pd.api.types.is_integer_dtype(series):
        return "int"
    if pd.api.types.is_float_dtype(series):
        return "float"
    if pd.api.types.is_datetime64_any_dtype(series):
        return "datetime"
    return "string"


def null_share_bound(null_share: float) -> float:
    """The ``max_null_share`` inferred for a seen share of nulls: 1.5 times it plus one
    point, rounded up to a whole percent (at most 1)."""
    return min(1.0, _ceil_to(null_share * 1.5 + 0.01, 0.01))


def infer_range(
    values: pd.Series,
    dtype: str,
    margin: float = DEFAULT_MARGIN,
    quantile: float = DEFAULT_QUANTILE,
) -> dict:
    """``min``/``max`` (and ``max_out_of_range_share`` when ``values`` has values
    outside them) from the robust quantiles of ``values`` widened by ``margin`` of
    their span (the module doc); empty when no value is finite."""
    numbers = values.to_numpy(dtype=np.float64)
    finite = numbers[np.isfinite(numbers)]
    if not len(finite):
        return {}
    q_low, q_high = np.quantile(finite, [quantile, 1.0 - quantile])
    span = q_high - q_low
    if span == 0:
        span = max(abs(q_low), 1.0)  # a constant column still gets room to vary
    low, high = q_low - margin * span, q_high + margin * span
    if dtype == "int":
        low, high = math.floor(low), math.ceil(high)
    else:
        step = _round_step(span)
        low, high = math.floor(low / step) * step, math.ceil(high / step) * step
        low, high = round(low, 10), round(high, 10)  # drop float noise from the step
    outside = float(np.mean((numbers < low) | (numbers > high)))
    result: dict = {"min": low, "max": high}
    if outside > 0:
        result["max_out_of_range_share"] = min(1.0, _ceil_to(outside * 2, 0.001))
    return result


def _round_step(span: float) -> float:
    """A round step two orders of magnitude below ``span`` (span 4.6 -> 0.01)."""
    return 10.0 ** (math.floor(math.log10(span)) - 2)


def _ceil_to(value: float, step: float) -> float:
    return round(math.ceil(value / step - 1e-9) * step, 10)
