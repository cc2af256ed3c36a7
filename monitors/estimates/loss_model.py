"""The loss model of direct loss estimation (DLE, as NannyML does it): gradient-boosted
trees that predict a regression model's per-record loss from its features and its
prediction, fitted on the reference. A leaf module shared by ``rmse`` and ``mae``.

The trees are scikit-learn's ``HistGradientBoostingRegressor`` (NannyML uses LightGBM;
the method is the same), stored as plain numbers: per tree the split feature, the raw
threshold, where a missing value goes, the children and the leaf values, in JSON. They
are evaluated here in numpy (``x <= threshold`` goes left, NaN as the node says, as
scikit-learn's predictor does), so no model object is ever pickled or unpickled.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np
import pandas as pd

from driftgate.monitors.estimates.calibration import VALUE_COLUMN, OutputsError
from driftgate.monitors.estimates.registry import SPREAD_ROWS, EstimatedMetric

# LightGBM's defaults, which NannyML's DLE uses: 100 trees of at most 31 leaves at
# learning rate 0.1; 20 records a leaf at least so that a leaf's mean loss is a mean.
TREES, LEAVES, LEARNING_RATE, LEAF_ROWS = 100, 31, 0.1, 20
# Levels of a categorical feature beyond this many are one "other" code: a model of
# the loss needs the frequent levels, and the JSON stays small.
MAX_LEVELS = 200
SPREAD_RESAMPLES = 200
TREE_FIELDS = ("feature", "threshold", "missing_left", "left", "right", "is_leaf", "value")


def feature_frame(features: pd.DataFrame | None, frame: pd.DataFrame) -> pd.DataFrame:
    """The stored outputs joined with the features, as the sample store keeps them (a
    feature named like an output column is ``feature.<name>``)."""
    if features is None:
        return frame
    clashing = {c: f"feature.{c}" for c in features.columns if c in frame.columns}
    return pd.concat(
        [frame.reset_index(drop=True), features.rename(columns=clashing).reset_index(drop=True)],
        axis=1,
    )


def _regressor():
    """The trees of a loss model, LightGBM's defaults (module docstring)."""
    from sklearn.ensemble import HistGradientBoostingRegressor

    return HistGradientBoostingRegressor(
        max_iter=TREES,
        max_leaf_nodes=LEAVES,
        learning_rate=LEARNING_RATE,
        min_samples_leaf=LEAF_ROWS,
        early_stopping=False,
        random_state=0,
    )


@dataclass(frozen=True)
class LossModel:
    """Per-record loss from the features and the prediction (``columns``; a categorical
    column's levels in ``levels``, coded by position, unseen levels missing)."""

    columns: tuple[str, ...]
    levels: dict[str, list[str]]
    baseline: float
    trees: tuple[dict[str, np.ndarray], ...]

    @classmethod
    def fit(cls, frame: pd.DataFrame, columns: list[str], loss: np.ndarray) -> LossModel:
        from threadpoolctl import threadpool_limits

        levels = {}
        for column in columns:
            if column != VALUE_COLUMN and not pd.api.types.is_numeric_dtype(frame[column]):
                counts = frame[column].astype(str).value_counts()
                levels[column] = counts.index[:MAX_LEVELS].tolist()
        model = cls(tuple(columns), levels, 0.0, ())
        matrix = model.matrix(frame)
        # One thread: the profile is fitted beside training or a service, and OpenMP
        # threads fighting over shared cores made a 2 s fit take 40 s.
        regressor = _regressor()  # imported first: the limit applies to loaded runtimes
        with threadpool_limits(limits=1, user_api="openmp"):
            regressor.fit(matrix, np.asarray(loss, dtype=np.float64))
        trees = []
        for (predictor,) in regressor._predictors:
            nodes = predictor.nodes
            trees.append(
                {
                    "feature": nodes["feature_idx"].astype(np.int64),
                    "threshold": nodes["num_threshold"].astype(np.float64),
                    "missing_left": nodes["missing_go_to_left"].astype(bool),
                    "left": nodes["left"].astype(np.int64),
                    "right": nodes["right"].astype(np.int64),
                    "is_leaf": nodes["is_leaf"].astype(bool),
                    "value": nodes["value"].astype(np.float64),
                }
            )
        baseline = float(np.ravel(regressor._baseline_prediction)[0])
        return cls(tuple(columns), levels, baseline, tuple(trees))

    def matrix(self, frame: pd.DataFrame) -> np.ndarray:
        """The model's inputs: numbers as they are, levels as their codes (NaN unseen)."""
        matrix = np.full((len(frame), len(self.columns)), np.nan)
        for j, column in enumerate(self.columns):
            if column not in frame:
                raise OutputsError(
                    f"the loss model needs the column {column!r}; the window lacks it"
                )
            values = frame[column]
            if column in self.levels:
                codes = {level: i for i, level in enumerate(self.levels[column])}
                matrix[:, j] = values.astype(str).map(codes).to_numpy(dtype=np.float64)
                matrix[values.isna().to_numpy(), j] = np.nan
            else:
                matrix[:, j] = pd.to_numeric(values, errors="coerce").to_numpy(dtype=np.float64)
        return matrix

    @cached_property
    def _forest(self) -> dict[str, Any]:
        """Every tree's nodes in one set of arrays (a tree's children offset by where
        its nodes start), so that one step moves every record down every tree at once."""
        sizes = [tree["value"].size for tree in self.trees]
        starts = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
        joined = {k: np.concatenate([t[k] for t in self.trees]) for k in TREE_FIELDS}
        offset = np.repeat(starts, sizes)
        leaf = joined["is_leaf"]
        return {
            "feature": joined["feature"],
            "threshold": joined["threshold"],
            "missing_left": joined["missing_left"],
            "left": joined["left"] + offset,
            "right": joined["right"] + offset,
            "is_leaf": leaf,
            "value": np.where(leaf, joined["value"], 0.0),
            "roots": starts,
        }

    def predict(self, frame: pd.DataFrame) -> np.ndarray:
        """The predicted loss of each record, never below 0 (a loss is not negative)."""
        matrix = self.matrix(frame)
        forest = self._forest
        trees = forest["roots"].size
        node = np.tile(forest["roots"], len(matrix))  # record i, tree t at i * trees + t
        record = np.repeat(np.arange(len(matrix)), trees)
        walking = np.arange(node.size)
        while walking.size:  # only the walks not yet at a leaf take the next step
            at = node[walking]
            walking, at = walking[~forest["is_leaf"][at]], at[~forest["is_leaf"][at]]
            x = matrix[record[walking], forest["feature"][at]]
            left = np.where(np.isnan(x), forest["missing_left"][at], x <= forest["threshold"][at])
            node[walking] = np.where(left, forest["left"][at], forest["right"][at])
        total = self.baseline + forest["value"][node].reshape(len(matrix), trees).sum(axis=1)
        return np.clip(total, 0.0, None)

    def to_json(self) -> dict[str, Any]:
        return {
            "method": "hist_gradient_boosting",
            "columns": list(self.columns),
            "levels": self.levels,
            "baseline": self.baseline,
            "trees": [{k: tree[k].tolist() for k in TREE_FIELDS} for tree in self.trees],
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> LossModel:
        if data.get("method") != "hist_gradient_boosting":
            raise OutputsError(f"unknown loss model method {data.get('method')!r}")
        dtypes = {"missing_left": bool, "is_leaf": bool, "feature": np.int64}
        dtypes.update(left=np.int64, right=np.int64)
        trees = []
        for tree in data["trees"]:
            arrays = {k: np.asarray(tree[k], dtype=dtypes.get(k, np.float64)) for k in TREE_FIELDS}
            size = arrays["value"].size
            if any(a.shape != (size,) for a in arrays.values()) or size == 0:
                raise OutputsError("loss model trees must be non-empty and their fields paired")
            inner = ~arrays["is_leaf"]
            parents = np.flatnonzero(inner)
            children = np.concatenate([arrays["left"][inner], arrays["right"][inner]])
            # Children after their parent and inside the tree: every walk ends at a leaf.
            if children.size and (
                children.max() >= size
                or (arrays["left"][inner] <= parents).any()
                or (arrays["right"][inner] <= parents).any()
            ):
                raise OutputsError("loss model tree children point outside the tree")
            if inner.any() and (
                arrays["feature"][inner].min() < 0
                or arrays["feature"][inner].max() >= len(data["columns"])
            ):
                raise OutputsError("loss model tree splits on a column it does not have")
            trees.append(arrays)
        return cls(
            columns=tuple(data["columns"]),
            levels={k: list(v) for k, v in data["levels"].items()},
            baseline=float(data["baseline"]),
            trees=tuple(trees),
        )


class DirectLossEstimate(EstimatedMetric):
    """DLE of a regression error metric: a :class:`LossModel` of the per-record
    ``loss`` fitted on the reference, whose mean prediction over a window is the
    window's expected loss; :meth:`aggregate` turns per-record losses into the metric.
    The no-drift spread and small-window bias are bootstrapped on the reference's
    predicted losses; the realized error is the reference losses' own (delta method)."""

    task = "regression"
    higher_is_better = False
    uses_features = True

    def loss(self, target: np.ndarray, predicted: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def aggregate(self, losses: np.ndarray) -> float:
        raise NotImplementedError

    def realized(self, frame, target) -> float:
        predicted = frame[VALUE_COLUMN].to_numpy(dtype=np.float64)
        return self.aggregate(self.loss(np.asarray(target, dtype=np.float64), predicted))

    def fit(self, profile, frame, target, features) -> dict:
        if features is None or not len(features.columns):
            raise OutputsError(
                f"performance_estimate:{self.metric} (direct loss estimation) needs the "
                "reference's features; none were given"
            )
        named = [f"feature.{c}" if c in frame.columns else str(c) for c in features.columns]
        columns = [VALUE_COLUMN, *named]
        joined = feature_frame(features, frame)
        losses = self.loss(np.asarray(target, dtype=np.float64), frame[VALUE_COLUMN].to_numpy())
        if not np.isfinite(losses).all():
            bad = int((~np.isfinite(losses)).sum())
            raise OutputsError(f"{bad} of {losses.size} reference targets give no finite loss")
        model = LossModel.fit(joined, columns, losses)
        return {
            "loss_model": model.to_json(),
            "realized_unit_std": self.unit_std(losses),
            "rows": len(frame),
        }

    def loss_model(self, profile) -> LossModel:
        # Parsed once per profile: a window's estimate needs it, not its JSON.
        cache = profile.__dict__.setdefault("_loss_models", {})
        if self.metric not in cache:
            cache[self.metric] = LossModel.from_json(profile.state[self.metric]["loss_model"])
        return cache[self.metric]

    def value(self, profile, frame, calibrator=None) -> float:
        return self.aggregate(self.loss_model(profile).predict(frame))

    def unit_std(self, losses: np.ndarray) -> float:
        """The standard deviation of the metric on ``n`` such losses times sqrt(n)."""
        raise NotImplementedError

    def realized_error(self, profile, rows: int) -> float:
        if rows < 1:
            return float("inf")
        return profile.state[self.metric]["realized_unit_std"] / math.sqrt(rows)

    def reference_std(self, profile, frame, outcomes) -> float:
        # The loss model's in-sample mean is the reference's mean loss (boosting on the
        # squared error keeps the mean), so its error is the reference losses' own.
        state = profile.state[self.metric]
        return state["realized_unit_std"] / math.sqrt(state["rows"])

    def spread(self, profile, frame, calibrated) -> dict:
        losses = self.loss_model(profile).predict(frame)
        rng = np.random.default_rng(0)
        units, biases = [], []
        for rows in SPREAD_ROWS:
            draws = rng.integers(0, losses.size, size=(SPREAD_RESAMPLES, rows))
            values = np.array([self.aggregate(losses[d]) for d in draws])
            units.append(float(np.std(values) * math.sqrt(rows)))
            biases.append(float(np.mean(values)) - profile.estimated[self.metric])
        return {"rows": list(SPREAD_ROWS), "unit_std": units, "bias": biases}

    def floor(self, profile) -> float:
        return math.inf  # an error has no worst value: any rise can be significant
