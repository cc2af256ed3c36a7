#!/usr/bin/env bash
# MLflow tracking server for a team: PostgreSQL backend store, artifacts proxied by the
# server (clients need no object-store credentials). Configuration comes from the
# environment only, so no password is ever written to a file:
#   MLFLOW_BACKEND_STORE_URI      required, e.g. postgresql+psycopg://mlflow:$PASSWORD@db:5432/mlflow
#   MLFLOW_ARTIFACTS_DESTINATION  required, e.g. s3://mlflow-artifacts or file:///srv/mlflow/artifacts
#                                 (S3: AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, MLFLOW_S3_ENDPOINT_URL)
#   MLFLOW_HOST (127.0.0.1)  MLFLOW_PORT (5000)  MLFLOW_WORKERS (2)
#   MLFLOW_ALLOWED_HOSTS          host names clients use, when not loopback (e.g. mlflow,mlflow:5000)
# The database must exist; MLflow creates and migrates its tables on start.
set -euo pipefail
: "${MLFLOW_BACKEND_STORE_URI:?set MLFLOW_BACKEND_STORE_URI (postgresql+psycopg://user:pass@host:5432/db)}"
: "${MLFLOW_ARTIFACTS_DESTINATION:?set MLFLOW_ARTIFACTS_DESTINATION (s3://bucket/prefix or file:///path)}"
MLFLOW_BIN="${MLFLOW_BIN:-$(command -v mlflow || echo "$(dirname "$0")/../.venv/bin/mlflow")}"
args=(server
  --backend-store-uri "$MLFLOW_BACKEND_STORE_URI"
  --artifacts-destination "$MLFLOW_ARTIFACTS_DESTINATION"
  --serve-artifacts
  --host "${MLFLOW_HOST:-127.0.0.1}"
  --port "${MLFLOW_PORT:-5000}"
  --workers "${MLFLOW_WORKERS:-2}")
if [[ -n "${MLFLOW_ALLOWED_HOSTS:-}" ]]; then
  args+=(--allowed-hosts "$MLFLOW_ALLOWED_HOSTS")
fi
# driftgate uses no MLflow server jobs; without this the server starts about eight job
# worker processes and takes ~18 s instead of ~2 s to stop.
export MLFLOW_SERVER_ENABLE_JOB_EXECUTION="${MLFLOW_SERVER_ENABLE_JOB_EXECUTION:-false}"
# exec: signals reach the server directly (docker stop, systemd, a test fixture).
exec "$MLFLOW_BIN" "${args[@]}"
