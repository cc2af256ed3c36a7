#!/usr/bin/env bash
# Runs once, on the first start of the PostgreSQL container (docker-entrypoint-initdb.d):
# one database and one login role per server, passwords from the environment only.
set -euo pipefail
: "${MLFLOW_DB_PASSWORD:?}" "${PREFECT_DB_PASSWORD:?}" "${DRIFTGATE_DB_PASSWORD:?}"
create() {  # role/database name, password
  psql -v ON_ERROR_STOP=1 --username "$POSTGRES_USER" --dbname postgres \
    -v name="$1" -v password="$2" <<'SQL'
CREATE ROLE :"name" LOGIN PASSWORD :'password';
CREATE DATABASE :"name" OWNER :"name";
SQL
}
create mlflow "$MLFLOW_DB_PASSWORD"
create prefect "$PREFECT_DB_PASSWORD"
create driftgate "$DRIFTGATE_DB_PASSWORD"
