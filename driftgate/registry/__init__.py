"""The one package that talks to MLflow (tracking and model registry).

Everything else in driftgate hands plain values to these functions; swapping the
local SQLite store for a tracking server is a change of URI, not of code. Callers
import this package and call ``registry.<name>``; the modules split it by
responsibility:

- :mod:`.client`: the tracking settings and their one ``MlflowClient``
  (:func:`tracking_client`), created once, lazily, naming its tracking *and* registry
  URI, never the process-wide default; :func:`use_store` and :func:`connect` for the
  calls that go through MLflow's process-wide state (runs, ``models:/`` downloads);
- :mod:`.errors`: RegistryError (exit 3, credentials masked), UnknownModelError (exit
  2), and ``registry_call``, the wrapper every registry call goes through;
- :mod:`.names`: the tags, aliases and artifact folders driftgate writes;
- :mod:`.values`: params, tags and metrics as MLflow stores them;
- :mod:`.versions`: model versions, their tags and description, aliases read;
- :mod:`.model_spec`: what a version predicts, from its tags and architecture.json;
- :mod:`.artifacts`: a version's files on its run;
- :mod:`.loading`: the one way a model or its weights are loaded (the allow-list first);
- :mod:`.runs`: training and drift-check runs logged;
- :mod:`.promotion`: gate results recorded, the champion moved forward and back;
- :mod:`.adoption`: a model trained elsewhere registered and completed.
"""

from driftgate.registry.adoption import record_adoption, register_run_model
from driftgate.registry.artifacts import (
    download_onnx_model,
    download_reference_profile,
    log_exports,
    run_has_artifact,
)
from driftgate.registry.client import (
    TrackingClient,
    connect,
    mlflow_client,
    tracking_client,
    use_store,
)
from driftgate.registry.errors import MissingArtifactError, RegistryError, UnknownModelError
from driftgate.registry.loading import (
    OnnxPyfunc,
    UnsafeModelError,
    load_adoptable_model,
    load_checked_model,
    load_pyfunc,
    load_weights,
    refuse_unsafe_model,
)
from driftgate.registry.model_spec import load_model_spec, version_feature_specs, version_outputs
from driftgate.registry.names import (
    ARCHITECTURE_FILE,
    CHAMPION_ALIAS,
    DATA_CONTRACT_ARTIFACT,
    DESCRIPTION_ADOPTION,
    DESCRIPTION_GATE,
    DESCRIPTION_MAX_CHARS,
    DESCRIPTION_PROMOTION,
    DESCRIPTION_ROLLBACK,
    EXPORTS_FOLDER,
    NO_VERSION,
    ONNX_ARTIFACT,
    PREVIOUS_CHAMPION_ALIAS,
    REFERENCE_PROFILE_ARTIFACT,
    REGISTRATION_COMPLETE,
    TAG_ADOPTED,
    TAG_ADOPTED_AT,
    TAG_ADOPTED_FROM,
    TAG_CLASSES,
    TAG_CONTRACT,
    TAG_CONTRACT_FILE,
    TAG_DATA_DIGEST,
    TAG_DVC_DATA_MD5,
    TAG_DVC_DATA_PATH,
    TAG_FEATURES,
    TAG_FLAVOUR,
    TAG_GATE_CHAMPION,
    TAG_GATE_EVALUATED_AT,
    TAG_GATE_FAILED_CHECKS,
    TAG_GATE_NOT_APPLICABLE,
    TAG_GATE_PREFIX,
    TAG_GATE_REPORT,
    TAG_GATE_STATUS,
    TAG_GIT_COMMIT,
    TAG_PROMOTED_AT,
    TAG_PROMOTION_PREVIOUS,
    TAG_PROMOTION_STATUS,
    TAG_REFERENCE_DIGEST,
    TAG_REFERENCE_PATH,
    TAG_REGISTRATION,
    TAG_ROLLBACK_REASON,
    TAG_ROLLED_BACK_AT,
    TAG_RUN_KIND,
    TAG_TASK,
    TAG_VALUE_MAX_CHARS,
    WEIGHTS_FOLDER,
)
from driftgate.registry.promotion import move_champion, record_gate_result, rollback_champion
from driftgate.registry.runs import (
    RegisteredVersion,
    log_monitoring_run,
    log_run_artifacts,
    log_training_run,
)
from driftgate.registry.versions import (
    VersionInfo,
    alias_version,
    existing_version,
    is_adopted,
    is_complete,
    latest_version,
    mark_complete,
    run_metrics,
    set_description_paragraph,
    tag_model_version,
    version_features,
    version_info,
    version_task,
    version_test_metric,
    with_paragraph,
)

__all__ = [
    "ARCHITECTURE_FILE",
    "CHAMPION_ALIAS",
    "DATA_CONTRACT_ARTIFACT",
    "DESCRIPTION_ADOPTION",
    "DESCRIPTION_GATE",
    "DESCRIPTION_MAX_CHARS",
    "DESCRIPTION_PROMOTION",
    "DESCRIPTION_ROLLBACK",
    "EXPORTS_FOLDER",
    "NO_VERSION",
    "ONNX_ARTIFACT",
    "PREVIOUS_CHAMPION_ALIAS",
    "REFERENCE_PROFILE_ARTIFACT",
    "REGISTRATION_COMPLETE",
    "TAG_ADOPTED",
    "TAG_ADOPTED_AT",
    "TAG_ADOPTED_FROM",
    "TAG_CLASSES",
    "TAG_CONTRACT",
    "TAG_CONTRACT_FILE",
    "TAG_DATA_DIGEST",
    "TAG_DVC_DATA_MD5",
    "TAG_DVC_DATA_PATH",
    "TAG_FEATURES",
    "TAG_FLAVOUR",
    "TAG_GATE_CHAMPION",
    "TAG_GATE_EVALUATED_AT",
    "TAG_GATE_FAILED_CHECKS",
    "TAG_GATE_NOT_APPLICABLE",
    "TAG_GATE_PREFIX",
    "TAG_GATE_REPORT",
    "TAG_GATE_STATUS",
    "TAG_GIT_COMMIT",
    "TAG_PROMOTED_AT",
    "TAG_PROMOTION_PREVIOUS",
    "TAG_PROMOTION_STATUS",
    "TAG_REFERENCE_DIGEST",
    "TAG_REFERENCE_PATH",
    "TAG_REGISTRATION",
    "TAG_ROLLBACK_REASON",
    "TAG_ROLLED_BACK_AT",
    "TAG_RUN_KIND",
    "TAG_TASK",
    "TAG_VALUE_MAX_CHARS",
    "WEIGHTS_FOLDER",
    "MissingArtifactError",
    "OnnxPyfunc",
    "RegisteredVersion",
    "RegistryError",
    "TrackingClient",
    "UnknownModelError",
    "UnsafeModelError",
    "VersionInfo",
    "alias_version",
    "connect",
    "download_onnx_model",
    "download_reference_profile",
    "existing_version",
    "is_adopted",
    "is_complete",
    "latest_version",
    "load_adoptable_model",
    "load_checked_model",
    "load_model_spec",
    "load_pyfunc",
    "load_weights",
    "log_exports",
    "log_monitoring_run",
    "log_run_artifacts",
    "log_training_run",
    "mark_complete",
    "mlflow_client",
    "move_champion",
    "record_adoption",
    "record_gate_result",
    "refuse_unsafe_model",
    "register_run_model",
    "rollback_champion",
    "run_has_artifact",
    "run_metrics",
    "set_description_paragraph",
    "tag_model_version",
    "tracking_client",
    "use_store",
    "version_feature_specs",
    "version_features",
    "version_info",
    "version_outputs",
    "version_task",
    "version_test_metric",
    "with_paragraph",
]
