"""infra/compose.yaml: the production stack is complete, configured by environment only,
and what it configures means something to the processes it starts.

No Docker engine runs on these machines, so the file is checked statically here; the
same processes (infra/*.sh on PostgreSQL) run for real in test_production_stack.py.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from tests.conftest import REPO_ROOT

INFRA = REPO_ROOT / "infra"
SECRETS = {
    "POSTGRES_PASSWORD",
    "MLFLOW_DB_PASSWORD",
    "PREFECT_DB_PASSWORD",
    "DRIFTGATE_DB_PASSWORD",
    "MINIO_ROOT_USER",
    "MINIO_ROOT_PASSWORD",
    "DRIFTGATE_ADMIN_TOKEN",
}
OPTIONAL = {"DRIFTGATE_WEBHOOK_URL"}
REFERENCE = re.compile(r"\$\{(?P<name>[A-Z0-9_]+)(?P<rest>[^}]*)\}")


@pytest.fixture(scope="module")
def text() -> str:
    return (INFRA / "compose.yaml").read_text()


@pytest.fixture(scope="module")
def compose(text) -> dict:
    return yaml.safe_load(text)


def interpolate(value: str, environ: dict[str, str]) -> str:
    """Compose's ``${NAME:?}`` / ``${NAME:-default}`` substitution, for the tests."""

    def substitute(match: re.Match) -> str:
        name, rest = match["name"], match["rest"]
        if name in environ:
            return environ[name]
        if rest.startswith(":-"):
            return rest[2:]
        raise KeyError(f"${{{name}}} is required")

    return REFERENCE.sub(substitute, value)


def test_the_stack_has_every_part_of_the_production_topology(compose):
    assert set(compose["services"]) >= {
        "postgres",
        "minio",
        "mlflow",
        "prefect-server",
        "prefect-worker",
        "deploy",
        "inference",
    }


def test_every_secret_is_an_environment_reference_without_a_default(compose, text):
    body = "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("#"))
    referenced = {m["name"]: m["rest"] for m in REFERENCE.finditer(body)}
    assert set(referenced) == SECRETS | OPTIONAL
    for name in SECRETS:
        assert referenced[name] == ":?", f"{name} must be required (${{{name}:?}}), no default"
    for service, spec in compose["services"].items():
        for key, value in (spec.get("environment") or {}).items():
            secret_like = any(w in key for w in ("PASSWORD", "SECRET", "TOKEN", "ACCESS_KEY"))
            if secret_like:
                assert REFERENCE.fullmatch(str(value)), f"{service}.{key} holds a literal"
            if "://" in str(value) and "@" in str(value):  # credentials inside a URL
                userinfo = str(value).split("://", 1)[1].split("@", 1)[0]
                assert ":" not in userinfo or "${" in userinfo, f"{service}.{key}: password"


def test_ports_are_published_on_loopback_only(compose):
    for service, spec in compose["services"].items():
        for port in spec.get("ports", []):
            assert str(port).startswith("127.0.0.1:"), f"{service} publishes {port} to all hosts"


def test_the_scripts_and_files_the_stack_runs_exist(compose):
    for service, spec in compose["services"].items():
        command = spec.get("command") or []
        for word in command if isinstance(command, list) else command.split():
            if word.startswith("infra/"):
                assert (REPO_ROOT / word).is_file(), f"{service} runs missing {word}"
    dockerfile = (INFRA / "Dockerfile").read_text()
    for line in dockerfile.splitlines():
        if line.startswith("COPY "):
            for source in line.split()[1:-1]:
                assert (REPO_ROOT / source).exists(), f"Dockerfile copies missing {source}"
    assert "torch==2.13.0" in dockerfile  # pinned: an unpinned torch pulls a CUDA build
    init = INFRA / "postgres-init" / "10-databases.sh"
    assert init.is_file() and init.stat().st_mode & 0o111


def test_each_server_script_reads_the_variables_compose_sets(compose):
    services = compose["services"]
    for service in ("mlflow", "prefect-server", "prefect-worker"):
        script = (REPO_ROOT / services[service]["command"][-1]).read_text()
        own = {k for k in services[service]["environment"] if not k.startswith("DRIFTGATE__")} - {
            "MLFLOW_TRACKING_URI",
            "DRIFTGATE_WEBHOOK_URL",
            "PREFECT_HOME",
        }
        # Variables read by the libraries themselves rather than by the script.
        own -= {"MLFLOW_S3_ENDPOINT_URL", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"}
        for name in own:
            assert name in script, f"{service}: {name} is set but infra script never reads it"


@pytest.mark.parametrize("service", ["prefect-worker", "inference", "deploy"])
def test_driftgate_processes_get_their_stores_and_servers_from_the_environment(
    compose, service, monkeypatch
):
    from driftgate.config import load_config

    environ = {name: f"pw-{name.lower()}" for name in SECRETS}
    for key, value in compose["services"][service]["environment"].items():
        monkeypatch.setenv(key, interpolate(str(value), environ))
    config = load_config(REPO_ROOT / "driftgate.yaml")
    password = environ["DRIFTGATE_DB_PASSWORD"]
    assert config.serving.sample_store_url == (
        f"postgresql://driftgate:{password}@postgres:5432/driftgate"
    )
    assert config.serving.control_store_url == config.serving.sample_store_url
    assert config.tracking.uri == "http://mlflow:5000"


def test_a_missing_secret_is_named(compose):
    value = compose["services"]["mlflow"]["environment"]["MLFLOW_BACKEND_STORE_URI"]
    with pytest.raises(KeyError, match="MLFLOW_DB_PASSWORD"):
        interpolate(value, {})


def test_the_env_file_compose_may_read_is_ignored_by_git():
    ignored = (REPO_ROOT / ".gitignore").read_text().splitlines()
    assert "infra/.env" in ignored or ".env" in ignored
    assert not Path(INFRA / ".env").exists() or ".env" in ignored
