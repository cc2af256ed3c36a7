"""Helpers for the production-topology tests: throw-away PostgreSQL databases, a scrubbed
environment for child processes, and long-running server processes that are always
stopped (with everything they started) and whose log tail goes into every failure.

PostgreSQL is the real server the store tests use (``DRIFTGATE_TEST_POSTGRES``, default
``postgresql://postgres@127.0.0.1:5432/test``); here an unreachable server fails the
test instead of skipping it: the production topology is PostgreSQL or nothing.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx

POSTGRES_ADMIN_URL = os.environ.get(
    "DRIFTGATE_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/test"
)
# Variables a child must never inherit: they would point it at another server, store
# or config (the autouse fixture in tests/conftest.py explains the MLflow case).
SCRUBBED_PREFIXES = ("MLFLOW_", "PREFECT_", "DRIFTGATE_")


@contextlib.contextmanager
def postgres_database(prefix: str) -> Iterator[str]:
    """A fresh database on the test server; yields its ``postgresql://`` URL; dropped after."""
    import psycopg

    admin = psycopg.connect(POSTGRES_ADMIN_URL, autocommit=True, connect_timeout=5)
    name = f"{prefix}_{uuid.uuid4().hex[:12]}"
    admin.execute(f'CREATE DATABASE "{name}"')
    base, _, _ = POSTGRES_ADMIN_URL.rpartition("/")
    try:
        yield f"{base}/{name}"
    finally:
        # FORCE: a server or flow run that outlived its test must not keep the database.
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.close()


def with_driver(url: str, driver: str) -> str:
    """``postgresql://...`` -> ``postgresql+<driver>://...``."""
    scheme, rest = url.split("://", 1)
    return f"{scheme.split('+', 1)[0]}+{driver}://{rest}"


def scrubbed_env(**variables: str) -> dict[str, str]:
    """This process's environment without any MLFLOW_/PREFECT_/DRIFTGATE_ variable, plus
    ``variables``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(SCRUBBED_PREFIXES)}
    env.update(NO_COLOR="1", PYTHONUNBUFFERED="1")
    env.update(variables)
    return env


@contextlib.contextmanager
def scrubbed_os_environ(**variables: str) -> Iterator[None]:
    """``os.environ`` scrubbed as :func:`scrubbed_env` for helpers that spawn children
    with the parent's environment; restored afterwards."""
    saved = dict(os.environ)
    try:
        os.environ.clear()
        os.environ.update(scrubbed_env(**variables))
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


def log_tail(path: Path, lines: int = 60) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError as exc:
        return f"<no log at {path}: {exc}>"
    return "\n".join(text.splitlines()[-lines:])


class ServerProcess:
    """One long-running child (a server or a worker) with its output in a log file."""

    def __init__(self, name: str, command: list[str], env: dict, cwd: Path, log: Path) -> None:
        self.name = name
        self.command = command
        self.env = env
        self.cwd = cwd
        self.log = log
        self.process: subprocess.Popen | None = None

    def start(self) -> ServerProcess:
        with open(self.log, "ab") as log:
            self.process = subprocess.Popen(
                self.command,
                cwd=self.cwd,
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )
        return self

    def tail(self, lines: int = 60) -> str:
        return f"--- {self.name} log ({self.log}), last {lines} lines ---\n" + log_tail(
            self.log, lines
        )

    def wait_until(self, ready: Callable[[], bool], timeout: float, what: str) -> float:
        """Poll ``ready`` until it is true; fail with the log tail if the process exits or
        the time runs out. Returns the seconds waited."""
        started = time.monotonic()
        deadline = started + timeout
        while time.monotonic() < deadline:
            if self.process is None or self.process.poll() is not None:
                code = None if self.process is None else self.process.returncode
                raise RuntimeError(f"{self.name} exited (code {code}) before {what}\n{self.tail()}")
            try:
                if ready():
                    return time.monotonic() - started
            except (httpx.HTTPError, OSError):
                pass
            time.sleep(0.5)
        raise TimeoutError(f"{self.name}: no {what} after {timeout:.0f} s\n{self.tail()}")

    def wait_for_health(self, url: str, timeout: float) -> float:
        return self.wait_until(
            lambda: httpx.get(url, timeout=2).status_code == 200, timeout, f"200 from {url}"
        )

    def stop(self, grace: float = 20.0) -> None:
        """Terminate, then kill: the process and every process it started (flow runs of a
        worker run in sessions of their own, so a signal to the worker would not reach
        them)."""
        import psutil

        if self.process is None:
            return
        try:
            children = psutil.Process(self.process.pid).children(recursive=True)
        except psutil.NoSuchProcess:
            children = []
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        for child in children:
            with contextlib.suppress(psutil.NoSuchProcess):
                child.terminate()
        _, alive = psutil.wait_procs(children, timeout=10)
        for child in alive:
            with contextlib.suppress(psutil.NoSuchProcess):
                child.kill()
        self.process = None
