#!/usr/bin/env bash
# A Prefect worker for driftgate's deployments (`driftgate deploy`). It runs each flow
# in a subprocess of its own, importing it from the installed driftgate package, so it
# must run where driftgate is installed. Environment only:
#   PREFECT_API_URL        required, e.g. http://prefect:4200/api
#   DRIFTGATE_WORK_POOL    (driftgate) the process work pool; created if missing
#   DRIFTGATE_WORKER_LIMIT (2) flow runs at once
#   MLFLOW_TRACKING_URI and DRIFTGATE_* store URLs reach the flows through this environment.
set -euo pipefail
: "${PREFECT_API_URL:?set PREFECT_API_URL (http://host:4200/api)}"
PREFECT_BIN="${PREFECT_BIN:-$(command -v prefect || echo "$(dirname "$0")/../.venv/bin/prefect")}"
exec "$PREFECT_BIN" worker start \
  --pool "${DRIFTGATE_WORK_POOL:-driftgate}" --type process \
  --limit "${DRIFTGATE_WORKER_LIMIT:-2}"
