"""What driftgate calls the things it writes to MLflow: tags, aliases, artifact folders
and the labelled paragraphs of a version's description (docs/mlflow_ui.md lists them).

Plain constants, so every module of the registry and every reader of a tag spells a
name one way.
"""

# Tags every model version carries, so the MLflow UI and later gates can read them.
TAG_DATA_DIGEST = "driftgate.data.train_digest"
TAG_FEATURES = "driftgate.features"
TAG_GIT_COMMIT = "driftgate.git_commit"
TAG_RUN_KIND = "driftgate.run_kind"
# What the version predicts and how it was built (training.flavour.ModelSpec): the task
# (binary | multiclass | regression), the flavour (builtin | factory) and, for
# multiclass, the class labels in output order (JSON list). The whole spec, feature
# kinds and categories included, is the run's weights/architecture.json
# (load_model_spec).
TAG_TASK = "driftgate.task"
TAG_FLAVOUR = "driftgate.flavour"
TAG_CLASSES = "driftgate.classes"
WEIGHTS_FOLDER = "weights"
ARCHITECTURE_FILE = "architecture.json"
# Written last by log_training_run: a version without it was cut off mid-registration.
TAG_REGISTRATION = "driftgate.registration"
REGISTRATION_COMPLETE = "complete"
# The DVC data version of the training data, on the run and on the model version: the
# MD5 DVC records for the file in dvc.lock, and that file's path in the project.
TAG_DVC_DATA_MD5 = "dvc.data_md5"
TAG_DVC_DATA_PATH = "dvc.data_path"
# The data contract a version was trained and gated under ("<name> v<N>") and its file;
# set at registration, and on the champion again when a person accepts a revision
# while it serves (jobs/contract_revision.py), so the UI names the file in effect.
TAG_CONTRACT = "driftgate.contract"
TAG_CONTRACT_FILE = "driftgate.contract_file"


# registered_model_tags.value is VARCHAR(5000) in MLflow's SQL stores (run tags allow
# 8000, version tags more): tag values are cut to the tightest, everywhere.
TAG_VALUE_MAX_CHARS = 5000

CHAMPION_ALIAS = "champion"
PREVIOUS_CHAMPION_ALIAS = "previous-champion"

# Gate results, on the candidate version and on its run (docs/mlflow_ui.md lists them).
TAG_GATE_PREFIX = "driftgate.gate."  # + check name: "PASS: observed (threshold)"
TAG_GATE_STATUS = "driftgate.gate.status"  # passed | failed
TAG_GATE_FAILED_CHECKS = "driftgate.gate.failed_checks"  # comma-separated, "-" when none
# Checks that did not apply to the candidate (comma-separated, "-" when none).
TAG_GATE_NOT_APPLICABLE = "driftgate.gate.not_applicable_checks"
TAG_GATE_CHAMPION = "driftgate.gate.champion_at_evaluation"  # version or "none"
TAG_GATE_EVALUATED_AT = "driftgate.gate.evaluated_at"  # UTC, ISO 8601
TAG_GATE_REPORT = "driftgate.gate.report"  # runs:/RUN/gates/gate.md
TAG_PROMOTION_STATUS = "driftgate.promotion.status"  # pending | promoted | aborted
TAG_PROMOTION_PREVIOUS = "driftgate.promotion.previous_champion"
TAG_PROMOTED_AT = "driftgate.promotion.promoted_at"
TAG_ROLLED_BACK_AT = "driftgate.rollback.at"
TAG_ROLLBACK_REASON = "driftgate.rollback.reason"
NO_VERSION = "none"

# Labelled paragraphs of a version's description, below the training summary; each is
# replaced, never stacked, when its step runs again (a re-run gate, a new promotion).
DESCRIPTION_GATE = "Gate"
DESCRIPTION_PROMOTION = "Promotion"
DESCRIPTION_ROLLBACK = "Rollback"
# model_versions.description is VARCHAR(5000) in MLflow's SQL stores (PostgreSQL enforces it).
DESCRIPTION_MAX_CHARS = 5000

EXPORTS_FOLDER = "exports"  # the gate's exports of a version, on its run
ONNX_ARTIFACT = f"{EXPORTS_FOLDER}/model.onnx"  # export_parity with format onnx
REFERENCE_PROFILE_ARTIFACT = "reference_profile"

# Adoption: a model trained and logged elsewhere, given what a driftgate-trained version
# carries (see jobs/adopt.py). The source run gets the artifacts, the version the tags.
TAG_ADOPTED = "driftgate.adopted"  # "true"
TAG_ADOPTED_AT = "driftgate.adopted.at"  # UTC, ISO 8601
TAG_ADOPTED_FROM = "driftgate.adopted.from"  # the URI given to `driftgate adopt`
TAG_REFERENCE_DIGEST = "driftgate.data.reference_digest"  # content digest of the reference
TAG_REFERENCE_PATH = "driftgate.data.reference_path"  # relative to the project when inside it
DESCRIPTION_ADOPTION = "Adopted"
DATA_CONTRACT_ARTIFACT = "data_contract"
