"""Reference profiles: everything a drift check needs from the reference data, fitted once.

A :class:`ReferenceProfile` is fitted from the training data when a model is trained
and saved with the model version; drift checks load it and never touch raw training
rows again ("fit once, score many").

Per numeric feature the profile keeps:

* missing (NaN) and infinite counts, summary statistics of the finite values
  (mean, population standard deviation, min, max);
* bin edges at reference quantiles with open outer bins ``(-inf, e1)``, ...,
  ``[ek, +inf)`` and the reference count in each bin (used by ``kl``, ``psi``, ``js``);
* the reference ECDF for ``ks`` and ``wasserstein`` as *breakpoints*: sorted distinct
  finite values with the count at each value (``ties``) and, between consecutive
  breakpoints, the count and sum of reference values strictly in between (``gap``).
  When a column has at most ``ks_max_breakpoints`` distinct values every distinct
  value is a breakpoint, the gaps are empty and KS is *exact*. Otherwise breakpoints
  are chosen so that at most ``1 / ks_max_breakpoints`` of the reference mass lies
  strictly inside any gap, which bounds the KS statistic error by that share; the
  bound is reported with every result (see ``docs/monitors.md``).

Per categorical feature: missing count and the count of each category (keyed by the
category's string form).

On disk a profile is a folder: ``profile.json`` (versioned, human-readable),
``breakpoints.npz`` (numeric arrays, loaded with ``allow_pickle=False``) and
``reference_sample.parquet`` (a bounded random sample of reference rows, used only
for the human-readable Evidently report) and, when the model's outputs were profiled,
``outputs/`` (:class:`monitors.outputs.OutputsProfile`: the champion's outputs on its
validation split and their calibrator, for ``prediction_drift`` and
``performance_estimate:<metric>``; a profile without it still loads). Nothing is pickled.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pandas as pd

from driftgate.core.errors import DriftgateError
from driftgate.core.parquet import read_parquet
from driftgate.training.features import category_key

PROFILE_FORMAT_VERSION = 1
PROFILE_JSON = "profile.json"
BREAKPOINTS_NPZ = "breakpoints.npz"
REFERENCE_SAMPLE_PARQUET = "reference_sample.parquet"
OUTPUTS_DIR = "outputs"

FeatureType = Literal["numeric", "categorical"]
FEATURE_TYPES: tuple[str, ...] = ("numeric", "categorical")

DEFAULT_N_BINS = 10
DEFAULT_KS_MAX_BREAKPOINTS = 65_536
DEFAULT_SAMPLE_ROWS = 5_000


class ProfileError(DriftgateError, ValueError):
    """A profile that cannot be fitted, saved or loaded; the message says why."""


def _float_or_none(value: float) -> float | None:
    """JSON has no NaN: missing statistics are written as ``null``."""
    return None if value is None or not np.isfinite(value) else float(value)


def _none_to_nan(value: float | None) -> float:
    return float("nan") if value is None else float(value)


class NumericCounts:
    """Counts shared by a numeric reference and a numeric window (``rows``,
    ``missing_count``, ``neg_inf_count``, ``pos_inf_count`` are fields of both)."""

    rows: int
    missing_count: int
    neg_inf_count: int
    pos_inf_count: int

    @property
    def non_missing(self) -> int:
        """Values that are not NaN (infinite values included)."""
        return self.rows - self.missing_count

    @property
    def finite_count(self) -> int:
        return self.non_missing - self.neg_inf_count - self.pos_inf_count

    @property
    def missing_share(self) -> float:
        return self.missing_count / self.rows if self.rows else float("nan")


@dataclass
class NumericProfile(NumericCounts):
    """The fitted reference of one numeric feature.

    Attributes:
        name: Column name.
        rows: Reference rows (including missing).
        missing_count: Reference NaN count.
        neg_inf_count: Reference ``-inf`` count.
        pos_inf_count: Reference ``+inf`` count.
        mean: Mean of the finite values (NaN when there are none).
        std: Population standard deviation (ddof=0) of the finite values.
        min: Smallest finite value.
        max: Largest finite value.
        bin_edges: Inner bin edges (reference quantiles, deduplicated); the outer bins
            are open, so there are ``len(bin_edges) + 1`` bins.
        bin_counts: Reference count in each bin (infinite values included).
        breakpoints: Sorted distinct finite values kept for the ECDF.
        ties: Reference count at each breakpoint.
        gap_counts: Reference count strictly between consecutive breakpoints
            (``len(breakpoints) - 1`` entries, all zero when exact).
        gap_sums: Sum of those reference values (for the Wasserstein distance).
    """

    name: str
    rows: int
    missing_count: int
    neg_inf_count: int
    pos_inf_count: int
    mean: float
    std: float
    min: float
    max: float
    bin_edges: np.ndarray
    bin_counts: np.ndarray
    breakpoints: np.ndarray
    ties: np.ndarray
    gap_counts: np.ndarray
    gap_sums: np.ndarray
    type: str = field(default="numeric", init=False)

    @property
    def ks_exact(self) -> bool:
        """True when every distinct reference value is a breakpoint."""
        return not bool(self.gap_counts.any())

    @property
    def ks_max_gap_share(self) -> float:
        """Largest reference share strictly inside one gap: the KS statistic error bound."""
        if self.non_missing == 0 or self.gap_counts.size == 0:
            return 0.0
        return float(self.gap_counts.max()) / self.non_missing

    def to_json(self) -> dict[str, Any]:
        return {
            "type": "numeric",
            "rows": self.rows,
            "missing_count": self.missing_count,
            "missing_share": _float_or_none(self.missing_share),
            "neg_inf_count": self.neg_inf_count,
            "pos_inf_count": self.pos_inf_count,
            "summary": {
                "mean": _float_or_none(self.mean),
                "std": _float_or_none(self.std),
                "min": _float_or_none(self.min),
                "max": _float_or_none(self.max),
            },
            "bins": {
                "edges": [float(e) for e in self.bin_edges],
                "counts": [int(c) for c in self.bin_counts],
                "note": "open outer bins: (-inf, e1), [e1, e2), ..., [ek, +inf)",
            },
            "ks": {
                "exact": self.ks_exact,
                "breakpoints": int(self.breakpoints.size),
                "max_gap_share": self.ks_max_gap_share,
            },
        }


@dataclass
class CategoricalProfile:
    """The fitted reference of one categorical feature.

    Attributes:
        name: Column name.
        rows: Reference rows (including missing).
        missing_count: Reference missing count (``pd.isna``).
        category_counts: Count per category, keyed by the category's string form.
    """

    name: str
    rows: int
    missing_count: int
    category_counts: dict[str, int]
    type: str = field(default="categorical", init=False)

    @property
    def non_missing(self) -> int:
        return self.rows - self.missing_count

    @property
    def missing_share(self) -> float:
        return self.missing_count / self.rows if self.rows else float("nan")

    def to_json(self) -> dict[str, Any]:
        return {
            "type": "categorical",
            "rows": self.rows,
            "missing_count": self.missing_count,
            "missing_share": _float_or_none(self.missing_share),
            "category_counts": dict(self.category_counts),
        }


FeatureProfile = NumericProfile | CategoricalProfile


def numeric_values(series: pd.Series) -> np.ndarray:
    """A column as float64 with missing values (None, NaN, pd.NA) as NaN."""
    return series.to_numpy(dtype="float64", na_value=np.nan)


def category_counts(series: pd.Series) -> tuple[dict[str, int], int]:
    """Category counts (string keys) and the missing count of one column or chunk.

    Keys are :func:`~driftgate.training.features.category_key`: ``3``, ``3.0`` and
    ``"3"`` count as one category, as they are one category to the model (a JSON
    client may send either, and a window read back from CSV turns ``"3"`` into 3).

    Counting on the original values first and converting only the distinct values to
    strings keeps this fast for large object columns. Missing values are counted in
    the same pass, as the counts of the missing distinct values: ``isna`` over an
    object column and ``value_counts(dropna=True)`` cost 80 ms each at a million rows,
    ``value_counts(dropna=False)`` 17 ms for both (measured).
    """
    counts = series.value_counts(dropna=False, sort=False)
    absent = np.asarray(counts.index.isna(), dtype=bool)
    values = counts.to_numpy()
    missing = int(values[absent].sum())
    merged: dict[str, int] = {}
    for value, count, is_absent in zip(counts.index, values, absent, strict=True):
        if count and not is_absent:
            key = category_key(value)
            merged[key] = merged.get(key, 0) + int(count)
    return merged, missing


def _select_breakpoints(
    values: np.ndarray, counts: np.ndarray, max_breakpoints: int | None
) -> np.ndarray:
    """Indices of the distinct values to keep as ECDF breakpoints.

    Keeps all of them when there are few enough; otherwise keeps the first and last
    value and every value at which the cumulative count crosses a multiple of
    ``total / max_breakpoints``, so that less than that share of the mass lies
    strictly between two kept values.
    """
    k = values.size
    if max_breakpoints is None or k <= max_breakpoints:
        return np.arange(k)
    cumulative = np.cumsum(counts)
    step = cumulative[-1] / max_breakpoints
    bucket = np.floor(cumulative / step).astype(np.int64)
    crossing = np.flatnonzero(np.diff(bucket, prepend=-1) > 0)
    keep = np.union1d(crossing, [0, k - 1])
    return keep


def fit_numeric(
    name: str, series: pd.Series, n_bins: int, ks_max_breakpoints: int | None
) -> NumericProfile:
    """Fit the profile of one numeric column (see the module docstring)."""
    values = numeric_values(series)
    missing = np.isnan(values)
    present = np.sort(values[~missing])
    neg_inf = int(np.searchsorted(present, -np.inf, side="right"))
    pos_inf = int(present.size - np.searchsorted(present, np.inf, side="left"))
    finite = present[neg_inf : present.size - pos_inf]

    if finite.size:
        quantiles = np.linspace(0.0, 1.0, n_bins + 1)[1:-1]
        edges = np.unique(np.quantile(finite, quantiles))
        mean = float(finite.mean())
        std = float(finite.std())
        lo, hi = float(finite[0]), float(finite[-1])
    else:
        edges = np.empty(0)
        mean = std = lo = hi = float("nan")
    positions = np.searchsorted(present, edges, side="left")
    bin_counts = np.diff(np.concatenate([[0], positions, [present.size]])).astype(np.int64)

    distinct, tie_counts = np.unique(finite, return_counts=True)
    keep = _select_breakpoints(distinct, tie_counts, ks_max_breakpoints)
    breakpoints = distinct[keep]
    ties = tie_counts[keep].astype(np.int64)
    if keep.size > 1:
        # Mass and sum of the dropped distinct values between consecutive kept ones.
        cumulative_counts = np.concatenate([[0], np.cumsum(tie_counts)])
        cumulative_sums = np.concatenate([[0.0], np.cumsum(distinct * tie_counts)])
        start, stop = keep[:-1] + 1, keep[1:]
        gap_counts = (cumulative_counts[stop] - cumulative_counts[start]).astype(np.int64)
        gap_sums = cumulative_sums[stop] - cumulative_sums[start]
        gap_sums[gap_counts == 0] = 0.0
    else:
        gap_counts = np.zeros(max(keep.size - 1, 0), dtype=np.int64)
        gap_sums = np.zeros(max(keep.size - 1, 0))
    return NumericProfile(
        name=name,
        rows=int(values.size),
        missing_count=int(missing.sum()),
        neg_inf_count=neg_inf,
        pos_inf_count=pos_inf,
        mean=mean,
        std=std,
        min=lo,
        max=hi,
        bin_edges=edges.astype(np.float64),
        bin_counts=bin_counts,
        breakpoints=breakpoints.astype(np.float64),
        ties=ties,
        gap_counts=gap_counts,
        gap_sums=gap_sums.astype(np.float64),
    )


def fit_categorical(name: str, series: pd.Series) -> CategoricalProfile:
    """Fit the profile of one categorical column."""
    counts, missing = category_counts(series)
    ordered = dict(sorted(counts.items(), key=lambda item: (-item[1], item[0])))
    return CategoricalProfile(
        name=name, rows=int(series.size), missing_count=missing, category_counts=ordered
    )


def infer_feature_type(series: pd.Series) -> FeatureType:
    """``numeric`` for numeric dtypes (booleans excluded), ``categorical`` otherwise."""
    dtype = series.dtype
    if pd.api.types.is_bool_dtype(dtype):
        return "categorical"
    if pd.api.types.is_numeric_dtype(dtype):
        return "numeric"
    return "categorical"


@dataclass
class ReferenceProfile:
    """Fitted reference statistics of every feature, saved with a model version.

    Attributes:
        features: Per-feature profiles in column order.
        rows: Reference rows.
        n_bins: Requested number of quantile bins per numeric feature.
        ks_max_breakpoints: Breakpoint budget (None: always exact).
        created_at: ISO timestamp of fitting.
        reference_sample: A bounded random sample of reference rows, for the
            human-readable report only (None if not kept).
        metadata: Free-form strings (e.g. data version), saved as given.
        outputs: The model's outputs on its validation split
            (:class:`monitors.outputs.OutputsProfile`), or None (a profile fitted
            before outputs were profiled, or of a model whose outputs are unknown).
    """

    features: dict[str, FeatureProfile]
    rows: int
    n_bins: int = DEFAULT_N_BINS
    ks_max_breakpoints: int | None = DEFAULT_KS_MAX_BREAKPOINTS
    created_at: str = ""
    reference_sample: pd.DataFrame | None = None
    metadata: dict[str, str] = field(default_factory=dict)
    outputs: Any = None  # monitors.outputs.OutputsProfile | None

    @classmethod
    def fit(
        cls,
        reference_df: pd.DataFrame,
        schema: dict[str, str] | None = None,
        *,
        n_bins: int = DEFAULT_N_BINS,
        ks_max_breakpoints: int | None = DEFAULT_KS_MAX_BREAKPOINTS,
        sample_rows: int = DEFAULT_SAMPLE_ROWS,
        seed: int = 0,
        metadata: dict[str, str] | None = None,
    ) -> ReferenceProfile:
        """Fit a profile on reference data.

        Args:
            reference_df: The reference rows (typically the training data).
            schema: Column -> ``"numeric"`` | ``"categorical"``; only these columns are
                profiled. None profiles every column, typed by :func:`infer_feature_type`.
            n_bins: Number of quantile bins for numeric features (ties can merge bins).
            ks_max_breakpoints: Largest number of ECDF breakpoints kept per numeric
                feature; None keeps every distinct value (KS always exact, profile as
                large as the distinct values).
            sample_rows: Rows of the reference sample kept for the Evidently report
                (0: none).
            seed: Seed of that sample.
            metadata: Free-form strings stored in ``profile.json``.

        Returns:
            The fitted profile.

        Raises:
            ProfileError: A schema column is missing, a type is unknown or a parameter
                is out of range.
        """
        if n_bins < 1:
            raise ProfileError(f"n_bins must be at least 1, got {n_bins}")
        if ks_max_breakpoints is not None and ks_max_breakpoints < 2:
            raise ProfileError(f"ks_max_breakpoints must be at least 2, got {ks_max_breakpoints}")
        if schema is None:
            schema = {str(c): infer_feature_type(reference_df[c]) for c in reference_df.columns}
        absent = [c for c in schema if c not in reference_df.columns]
        if absent:
            raise ProfileError(f"schema columns not in the reference data: {absent}")
        features: dict[str, FeatureProfile] = {}
        for name, kind in schema.items():
            if kind == "numeric":
                features[name] = fit_numeric(name, reference_df[name], n_bins, ks_max_breakpoints)
            elif kind == "categorical":
                features[name] = fit_categorical(name, reference_df[name])
            else:
                raise ProfileError(
                    f"column {name!r}: unknown feature type {kind!r}; "
                    f"known types: {list(FEATURE_TYPES)}"
                )
        sample = None
        if sample_rows > 0 and len(reference_df):
            columns = list(schema)
            take = min(sample_rows, len(reference_df))
            sample = reference_df[columns].sample(n=take, random_state=seed).reset_index(drop=True)
        return cls(
            features=features,
            rows=len(reference_df),
            n_bins=n_bins,
            ks_max_breakpoints=ks_max_breakpoints,
            created_at=datetime.now(UTC).isoformat(timespec="seconds"),
            reference_sample=sample,
            metadata=dict(metadata or {}),
        )

    @property
    def schema(self) -> dict[str, str]:
        """Column -> feature type, in column order."""
        return {name: feature.type for name, feature in self.features.items()}

    def save(self, path: str | Path) -> Path:
        """Write the profile to folder ``path`` (created if needed) and return it."""
        folder = Path(path)
        folder.mkdir(parents=True, exist_ok=True)
        arrays: dict[str, np.ndarray] = {}
        features_json: dict[str, Any] = {}
        for index, (name, feature) in enumerate(self.features.items()):
            entry = feature.to_json()
            if isinstance(feature, NumericProfile):
                # Column names can hold any character; array keys use the position.
                key = f"f{index}"
                entry["ks"]["arrays_key"] = key
                arrays[f"{key}_breakpoints"] = feature.breakpoints
                arrays[f"{key}_ties"] = _compact_counts(feature.ties)
                if not feature.ks_exact:
                    arrays[f"{key}_gap_counts"] = _compact_counts(feature.gap_counts)
                    arrays[f"{key}_gap_sums"] = feature.gap_sums
            features_json[name] = entry
        document = {
            "format": "driftgate.reference_profile",
            "format_version": PROFILE_FORMAT_VERSION,
            "created_at": self.created_at,
            "rows": self.rows,
            "n_bins": self.n_bins,
            "ks_max_breakpoints": self.ks_max_breakpoints,
            "metadata": self.metadata,
            "files": {
                "breakpoints": BREAKPOINTS_NPZ,
                "reference_sample": (
                    REFERENCE_SAMPLE_PARQUET if self.reference_sample is not None else None
                ),
                "outputs": OUTPUTS_DIR if self.outputs is not None else None,
            },
            "features": features_json,
        }
        (folder / PROFILE_JSON).write_text(json.dumps(document, indent=2, allow_nan=False))
        np.savez_compressed(folder / BREAKPOINTS_NPZ, **arrays)
        sample_path = folder / REFERENCE_SAMPLE_PARQUET
        if self.reference_sample is not None:
            self.reference_sample.to_parquet(sample_path, index=False)
        elif sample_path.exists():
            sample_path.unlink()
        if self.outputs is not None:
            self.outputs.save(folder / OUTPUTS_DIR)
        return folder

    @classmethod
    def load(cls, path: str | Path) -> ReferenceProfile:
        """Read a profile written by :meth:`save`.

        Raises:
            ProfileError: The folder is not a profile or its format version is unknown.
        """
        folder = Path(path)
        json_path = folder / PROFILE_JSON
        if not json_path.is_file():
            raise ProfileError(f"not a reference profile (no {PROFILE_JSON}): {folder}")
        document = json.loads(json_path.read_text())
        version = document.get("format_version")
        if document.get("format") != "driftgate.reference_profile" or version != 1:
            raise ProfileError(
                f"{json_path}: unsupported profile format {document.get('format')!r} "
                f"version {version!r} (this driftgate reads version {PROFILE_FORMAT_VERSION})"
            )
        with np.load(folder / BREAKPOINTS_NPZ, allow_pickle=False) as npz:
            arrays = {key: npz[key] for key in npz.files}
        features: dict[str, FeatureProfile] = {}
        for name, entry in document["features"].items():
            if entry["type"] == "numeric":
                features[name] = _numeric_from_json(name, entry, arrays)
            elif entry["type"] == "categorical":
                features[name] = CategoricalProfile(
                    name=name,
                    rows=int(entry["rows"]),
                    missing_count=int(entry["missing_count"]),
                    category_counts={k: int(v) for k, v in entry["category_counts"].items()},
                )
            else:
                raise ProfileError(f"{json_path}: feature {name!r} has type {entry['type']!r}")
        sample_file = document["files"].get("reference_sample")
        sample = read_parquet(folder / sample_file) if sample_file else None
        outputs = None
        if document["files"].get("outputs"):  # absent from profiles fitted before it
            from driftgate.monitors.outputs import OutputsProfile

            outputs = OutputsProfile.load(folder / document["files"]["outputs"])
        return cls(
            features=features,
            rows=int(document["rows"]),
            n_bins=int(document["n_bins"]),
            ks_max_breakpoints=document["ks_max_breakpoints"],
            created_at=document["created_at"],
            reference_sample=sample,
            metadata=dict(document.get("metadata", {})),
            outputs=outputs,
        )


def _compact_counts(counts: np.ndarray) -> np.ndarray:
    """Counts in the smallest unsigned integer type that holds them (smaller files)."""
    top = int(counts.max()) if counts.size else 0
    for dtype in (np.uint8, np.uint16, np.uint32):
        if top <= np.iinfo(dtype).max:
            return counts.astype(dtype)
    return counts.astype(np.uint64)


def _numeric_from_json(
    name: str, entry: dict[str, Any], arrays: dict[str, np.ndarray]
) -> NumericProfile:
    key = entry["ks"]["arrays_key"]
    breakpoints = arrays[f"{key}_breakpoints"].astype(np.float64)
    ties = arrays[f"{key}_ties"].astype(np.int64)
    gaps = max(breakpoints.size - 1, 0)
    if f"{key}_gap_counts" in arrays:
        gap_counts = arrays[f"{key}_gap_counts"].astype(np.int64)
        gap_sums = arrays[f"{key}_gap_sums"].astype(np.float64)
    else:
        gap_counts = np.zeros(gaps, dtype=np.int64)
        gap_sums = np.zeros(gaps)
    summary = entry["summary"]
    return NumericProfile(
        name=name,
        rows=int(entry["rows"]),
        missing_count=int(entry["missing_count"]),
        neg_inf_count=int(entry["neg_inf_count"]),
        pos_inf_count=int(entry["pos_inf_count"]),
        mean=_none_to_nan(summary["mean"]),
        std=_none_to_nan(summary["std"]),
        min=_none_to_nan(summary["min"]),
        max=_none_to_nan(summary["max"]),
        bin_edges=np.asarray(entry["bins"]["edges"], dtype=np.float64),
        bin_counts=np.asarray(entry["bins"]["counts"], dtype=np.int64),
        breakpoints=breakpoints,
        ties=ties,
        gap_counts=gap_counts,
        gap_sums=gap_sums,
    )
