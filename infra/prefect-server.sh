#!/usr/bin/env bash
# Prefect server (API, UI and scheduler) on PostgreSQL. Environment only:
#   PREFECT_API_DATABASE_CONNECTION_URL  required, e.g. postgresql+asyncpg://prefect:$PASSWORD@db:5432/prefect
#   PREFECT_SERVER_API_HOST (127.0.0.1)  PREFECT_SERVER_API_PORT (4200)
#   PREFECT_HOME                         where the server keeps local files (default ~/.prefect)
# Clients and workers then use PREFECT_API_URL=http://<host>:<port>/api.
# The database must exist; Prefect migrates its schema on start.
set -euo pipefail
: "${PREFECT_API_DATABASE_CONNECTION_URL:?set PREFECT_API_DATABASE_CONNECTION_URL (postgresql+asyncpg://user:pass@host:5432/db)}"
PREFECT_BIN="${PREFECT_BIN:-$(command -v prefect || echo "$(dirname "$0")/../.venv/bin/prefect")}"
export PREFECT_SERVER_ANALYTICS_ENABLED=false
exec "$PREFECT_BIN" server start \
  --host "${PREFECT_SERVER_API_HOST:-127.0.0.1}" \
  --port "${PREFECT_SERVER_API_PORT:-4200}"
