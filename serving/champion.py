"""The served model: ``models:/NAME@champion``, reloaded when the alias moves.

A background thread re-reads the alias every ``poll_seconds``. When it points at a
new version, that version is loaded, warmed up and checked *beside* the current one;
only then is the reference swapped (one attribute assignment, atomic under the GIL),
so a request always sees one whole model: its version, feature order, validator and
weights together. A version that fails to load leaves the current one serving.

The alias is resolved to a version first and that exact version is loaded
(``models:/NAME/VERSION``): loading ``@champion`` directly could pick up a newer
version than the one reported if the alias moved in between.

The contract the requests are validated against is read again at each poll too
(``contract``: the project's contract in effect, :mod:`driftgate.config.contract_files`):
when a person accepted a revision, the current version's validator is rebuilt on the
new file and swapped the same way, without reloading the model.

Only :mod:`driftgate.registry` talks to MLflow; this module never moves an alias.
"""

from __future__ import annotations

import dataclasses
import gc
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from driftgate import registry
from driftgate.config import TrackingSettings
from driftgate.config.serving import ServingSettings
from driftgate.core.redaction import redact_credentials
from driftgate.serving.backends import Scorer, load_scorer
from driftgate.serving.encoding import RecordEncoder
from driftgate.serving.outputs import expected_shape
from driftgate.serving.validation import RecordChecker
from driftgate.training.features import FeatureSpec

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class LoadedModel:
    """One registered version, ready to score."""

    name: str
    version: str
    features: tuple[str, ...]
    scorer: Scorer  # serving.backend's: pyfunc or ONNX Runtime
    checker: RecordChecker
    loaded_at: float = field(default_factory=time.time)
    # What it predicts (its weights/architecture.json): binary | multiclass | regression,
    # and for multiclass the class labels in output-column order.
    task: str = "binary"
    classes: tuple[str, ...] = ()
    # Kind and categories per feature (all numeric when empty): how records are encoded.
    specs: tuple[FeatureSpec, ...] = ()
    encoder: RecordEncoder = field(init=False, repr=False)

    def __post_init__(self) -> None:
        specs = self.specs or tuple(FeatureSpec(f) for f in self.features)
        object.__setattr__(self, "encoder", RecordEncoder(specs))

    def encode(self, records: list[dict]) -> np.ndarray:
        """The float32 input matrix of validated ``records``, in :attr:`features` order."""
        return self.encoder.encode(records)

    def predict(self, matrix: np.ndarray) -> np.ndarray:
        """The task's output per row of a float32 matrix in :attr:`features` order:
        ``(n,)`` (P(class 1) or the value) or ``(n, classes)`` for multiclass."""
        outputs = np.asarray(self.scorer.predict(matrix), dtype=np.float64)
        if self.task == "multiclass":
            return outputs.reshape(len(matrix), -1) if outputs.size else outputs
        return outputs.reshape(-1)


def freeze_long_lived() -> None:
    """Collect, then move every object alive now (the libraries, the stores, the loaded
    model) out of the cyclic collector's sight (``gc.freeze``).

    Why: the service holds a few hundred thousand long-lived objects (torch, MLflow,
    pandas, SQLAlchemy); each full collection walks all of them, holding the GIL for
    tens to hundreds of milliseconds while requests wait. Frozen, the collector walks
    only what requests allocate. Unfrozen first, so a swapped-out model's cycles are
    collected rather than frozen forever: one full collection per swap.
    """
    gc.unfreeze()
    gc.collect()
    gc.freeze()


def load_version(
    tracking: TrackingSettings,
    model_name: str,
    version: str,
    make_checker: Callable[[list], RecordChecker],
    settings: ServingSettings | None = None,
) -> LoadedModel:
    """Load ``version`` through the registry adapter and score one row to warm it up.

    ``make_checker`` gets the version's feature specs (names, kinds, categories) and
    builds its validator; ``settings.backend`` says what scores it (default: pyfunc)."""
    specs = registry.version_feature_specs(tracking, model_name, version)
    features = [spec.name for spec in specs]
    task, classes = registry.version_outputs(tracking, model_name, version)
    scorer = load_scorer(tracking, model_name, str(version), settings or ServingSettings())
    model = LoadedModel(
        model_name,
        str(version),
        tuple(features),
        scorer,
        make_checker(specs),
        task=task,
        classes=classes,
        specs=tuple(specs),
    )
    warm = model.predict(np.zeros((1, len(features)), dtype=np.float32))
    expected = expected_shape(task, 1, len(classes))
    if warm.shape != expected:
        raise registry.RegistryError(
            f"{model_name} v{version} ({task}) returned shape {warm.shape} for one row; "
            f"expected {expected}"
        )
    return model


class ChampionWatcher:
    """Holds the current champion and follows the alias.

    Args:
        tracking: Where the registry is.
        model_name: Registered model name.
        make_checker: Builds the request validator for a version's feature specs
            and a contract file (or None).
        poll_seconds: How often the alias is re-read.
        on_reload: Called with ``(outcome, version)`` after each load attempt
            (``"loaded"`` or ``"failed"``), e.g. for metrics.
        settings: The service's settings (``backend`` and its threads); default pyfunc.
        contract: The contract file in effect now, asked at each poll (default: none).
    """

    def __init__(
        self,
        tracking: TrackingSettings,
        model_name: str,
        make_checker: Callable[[list, Path | None], RecordChecker],
        poll_seconds: float,
        on_reload: Callable[[str, str], None] | None = None,
        settings: ServingSettings | None = None,
        contract: Callable[[], Path | None] = lambda: None,
    ) -> None:
        self.tracking = tracking
        self.settings = settings or ServingSettings()
        self.model_name = model_name
        self.make_checker = make_checker
        self.contract = contract
        self.contract_path: Path | None = None  # the file the current validator follows
        self.poll_seconds = poll_seconds
        self.on_reload = on_reload or (lambda outcome, version: None)
        self.current: LoadedModel | None = None
        self.last_error: str | None = None
        self._failed_version: str | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def refresh(self) -> bool:
        """Re-read the alias and load a new champion if it moved; True if swapped.
        Then follow the contract in effect (:meth:`follow_contract`)."""
        swapped = self._follow_alias()
        self.follow_contract()
        return swapped

    def follow_contract(self) -> bool:
        """Rebuild the current version's validator when the contract in effect is no
        longer the one it was built on; True if swapped. A contract that fails to load
        leaves the current validator in place (logged, tried again next poll)."""
        try:
            path = self.contract()
        except Exception as exc:  # a folder that cannot be listed: keep serving
            log.error("cannot read which contract is in effect: %s", exc)
            return False
        current = self.current
        if current is None or path == self.contract_path:
            return False
        try:
            checker = self.make_checker(list(current.specs), path)
        except Exception as exc:
            log.error("contract %s not applied, still validating with %s: %s",
                      path, self.contract_path, redact_credentials(str(exc)))  # fmt: skip
            return False
        # A new LoadedModel, not a mutation: a request holds one whole model.
        self.current = dataclasses.replace(current, checker=checker)
        log.info("validating %s v%s requests with contract %s (was %s)",
                 self.model_name, current.version, path, self.contract_path)  # fmt: skip
        self.contract_path = path
        return True

    def _follow_alias(self) -> bool:
        try:
            version = registry.alias_version(
                self.tracking, self.model_name, registry.CHAMPION_ALIAS
            )
        except Exception as exc:
            self.last_error = redact_credentials(f"cannot read the champion alias: {exc}")
            log.warning("%s", self.last_error)
            return False
        if version is None:
            self.last_error = f"model '{self.model_name}' has no '{registry.CHAMPION_ALIAS}' alias"
            if self.current is not None:
                log.warning("%s; still serving v%s", self.last_error, self.current.version)
            else:
                log.warning("%s; not serving until it is set", self.last_error)
            return False
        if self.current is not None and self.current.version == version:
            self.last_error = None
            return False
        if version == self._failed_version:
            return False  # do not reload a broken version every poll; wait for a new one
        try:
            path = self.contract()
            model = load_version(
                self.tracking,
                self.model_name,
                version,
                lambda specs: self.make_checker(specs, path),
                self.settings,
            )
        except Exception as exc:
            self._failed_version = version
            self.last_error = redact_credentials(f"cannot load {self.model_name} v{version}: {exc}")
            log.error("%s", self.last_error)
            self.on_reload("failed", version)
            return False
        previous = self.current
        self.current = model  # the swap: one reference assignment
        self.contract_path = path
        self._failed_version = None
        self.last_error = None
        log.info(
            "serving %s v%s (was %s)",
            self.model_name,
            version,
            f"v{previous.version}" if previous else "none",
        )
        self.on_reload("loaded", version)
        del previous  # its cycles, if any, go in this collection, not into the frozen set
        freeze_long_lived()
        return True

    def start(self) -> None:
        """Poll in a daemon thread until :meth:`stop`."""
        self._thread = threading.Thread(target=self._run, name="champion-watcher", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.poll_seconds):
            self.refresh()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
