"""Security of the running service, over real HTTP.

- admin endpoints: every wrong token (same length, right prefix, one character more
  or less, another case) is a 403 that went through ``hmac.compare_digest``; no token
  or another scheme is a 401;
- secrets never leave: with PostgreSQL stores whose URLs carry a password and an
  admin token, neither appears in log records (DEBUG, SQLAlchemy included), HTTP
  answers, ``/metrics``, the log file of a ``driftgate serve`` process, or the output
  of ``driftgate pause``/``resume``;
- request data never becomes a path: traversal strings in the request id, field
  names and admin fields create no file anywhere.
"""

from __future__ import annotations

import hmac
import logging
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import httpx
import pytest

from driftgate.config.serving import ServingSettings
from tests.conftest import free_port
from tests.driftgate.stores.conftest import _postgres_database
from tests.serving.conftest import ADMIN_TOKEN, ThreadedService, admin_headers, records_of

PASSWORD = "Pw-s3cr3t-b71d"


@pytest.fixture(scope="module")
def postgres_urls():
    """Two fresh PostgreSQL databases; their URLs carry a password (the local server
    trusts loopback, so the password is accepted and ignored)."""
    databases = [_postgres_database(), _postgres_database()]
    urls = [next(database) for database in databases]
    yield [url.replace("postgres@", f"postgres:{PASSWORD}@", 1) for url in urls]
    for database in databases:
        next(database, None)


def assert_clean(text: str, where: str) -> None:
    for secret in (PASSWORD, ADMIN_TOKEN):
        assert secret not in text, (
            f"{where} leaks {secret[:4]}...: {text[text.index(secret) - 200 :][:300]}"
        )


# -- the admin token -----------------------------------------------------------------


@pytest.fixture(scope="module")
def service(registered, tmp_path_factory):
    folder = tmp_path_factory.mktemp("security-stores")
    settings = ServingSettings(
        sample_store_url=f"sqlite:///{folder / 'samples.db'}",
        control_store_url=f"sqlite:///{folder / 'control.db'}",
    )
    registered.set_champion("1")
    with ThreadedService(registered.config, settings) as running:
        running.folder = folder
        yield running


def test_every_wrong_token_is_refused_through_compare_digest(service, monkeypatch):
    compared = []
    real = hmac.compare_digest

    def spy(given, expected):
        compared.append((len(given), len(expected)))
        return real(given, expected)

    monkeypatch.setattr(hmac, "compare_digest", spy)
    guesses = [
        "x" * len(ADMIN_TOKEN),  # same length, all wrong
        ADMIN_TOKEN[:-1] + ("0" if ADMIN_TOKEN[-1] != "0" else "1"),  # right but the last
        ADMIN_TOKEN[:-1],  # a prefix
        ADMIN_TOKEN + "0",  # one more character
        ADMIN_TOKEN.upper(),
        ADMIN_TOKEN[0],
    ]
    for guess in guesses:
        refused = service.client.post(
            "/admin/pause", json={"reason": "guess"}, headers=admin_headers(guess)
        )
        assert refused.status_code == 403, (guess, refused.text)
        assert refused.json() == {"detail": "admin token refused"}
    assert len(compared) == len(guesses)  # every guess went through compare_digest
    for headers in ({}, {"Authorization": "Bearer"}, {"Authorization": f"Basic {ADMIN_TOKEN}"}):
        assert service.client.get("/admin/state", headers=headers).status_code == 401
    assert len(compared) == len(guesses)  # malformed headers never reach the comparison
    assert service.client.get("/admin/state", headers=admin_headers()).status_code == 200
    assert len(compared) == len(guesses) + 1


# -- request data never becomes a path -----------------------------------------------


def _tree(*roots: Path) -> set[Path]:
    return {p for root in roots for p in root.rglob("*")}


def test_the_api_description_is_not_served_by_default(service):
    """Issue 28 ("also noted"): /docs, /redoc and /openapi.json answered any client.
    Failed before: 200 for each."""
    for path in ("/docs", "/redoc", "/openapi.json"):
        assert service.client.get(path).status_code == 404, path
    assert service.client.get("/metrics").status_code == 200  # metrics_auth: none


def test_api_docs_and_metrics_auth_are_settings(registered, tmp_path):
    settings = ServingSettings(
        sample_store_url=f"sqlite:///{tmp_path / 'samples.db'}",
        control_store_url=f"sqlite:///{tmp_path / 'control.db'}",
        api_docs=True,
        metrics_auth="token",
    )
    registered.set_champion("1")
    with ThreadedService(registered.config, settings) as running:
        assert running.client.get("/openapi.json").json()["info"]["title"] == "driftgate inference"
        assert running.client.get("/docs").status_code == 200
        assert running.client.get("/metrics").status_code == 401
        assert (
            running.client.get("/metrics", headers={"Authorization": "Bearer x"}).status_code == 403
        )
        answer = running.client.get("/metrics", headers=admin_headers())
        assert answer.status_code == 200 and "driftgate_" in answer.text


def test_request_data_never_becomes_a_path(service, registered):
    marker = f"escape-{uuid.uuid4().hex[:8]}"
    traversals = [
        f"../../../../tmp/{marker}",
        f"/tmp/{marker}",
        f"..\\..\\{marker}",
        f"file:///tmp/{marker}",
        f"%2e%2e%2f{marker}",
    ]
    roots = [Path(registered.config.root), service.folder]
    before = _tree(*roots)
    record = records_of(registered.rows, 0, 1)[0]
    for text in traversals:
        echoed = service.client.post(
            "/predict", json={"records": [record]}, headers={"X-Request-ID": text}
        )
        assert echoed.status_code == 200
        assert echoed.json()["request_id"] != text  # not a valid id: a fresh one is used
        service.client.post("/predict", json={"records": [{**record, text: 1.0}]})
        for path in ("/admin/pause", "/admin/resume"):
            service.client.post(
                path,
                json={"reason": text, "by": text, "monitor": text, "review_id": text,
                      "evidence": [text]} if path == "/admin/pause" else {"reason": text},
                headers=admin_headers(),
            )  # fmt: skip
        service.client.get(f"/admin/state?limit={text}", headers=admin_headers())
        service.client.get(f"/{text}")
    new = _tree(*roots) - before
    # The stores' own files may appear (SQLite journals); nothing else may.
    assert all(p.parent == service.folder and p.name.startswith(("samples.db", "control.db"))
               for p in new), sorted(new)  # fmt: skip
    for root in (*roots, Path("/tmp"), Path.cwd()):
        assert not list(root.glob(f"**/*{marker}*")), root


# -- secrets -------------------------------------------------------------------------


def test_no_secret_in_logs_answers_or_metrics(registered, postgres_urls, caplog):
    caplog.set_level(logging.DEBUG)
    settings = ServingSettings(
        sample_store_url=postgres_urls[0],
        control_store_url=postgres_urls[1],
        model_poll_seconds=0.2,
        pause_poll_seconds=0.2,
    )
    answers = []
    registered.set_champion("1")
    with ThreadedService(registered.config, settings) as running:
        client = running.client
        records = records_of(registered.rows, 0, 3)
        answers.append(client.post("/predict", json={"records": records}))
        assert answers[-1].status_code == 200, answers[-1].text
        answers.append(client.post("/predict", json={"records": [{"temperature": "hot"}]}))
        answers.append(
            client.post("/admin/pause", json={"reason": "test"}, headers=admin_headers())
        )
        answers.append(client.post("/predict", json={"records": records}))  # 503 paused
        answers.append(client.get("/admin/state", headers=admin_headers()))
        answers.append(
            client.post("/admin/resume", json={"reason": "done"}, headers=admin_headers())
        )
        answers.append(client.get("/readyz"))
        answers.append(client.get("/metrics"))
        answers.append(
            client.post("/admin/pause", json={"reason": "x"}, headers=admin_headers("no"))
        )
        assert repr(running.state.samples).count("***") == 1  # the store's repr is redacted
    for answer in answers:
        assert_clean(answer.text + repr(answer.headers), f"{answer.request.url.path} answer")
    assert "serving served v1" in caplog.text  # the service's records were captured
    assert_clean(caplog.text, "the log")


def _driftgate(*args, env, cwd, **kwargs):
    return subprocess.Popen(
        [str(Path(sys.executable).with_name("driftgate")), *args],
        env=env,
        cwd=cwd,
        **kwargs,
    )


def test_a_serve_process_log_and_cli_output_hold_no_secret(registered, postgres_urls, tmp_path):
    """``driftgate serve --verbose`` configured through DRIFTGATE__* variables (as a
    deployment would), its log file, and ``driftgate pause``/``resume`` output."""
    port = free_port()
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("MLFLOW_", "DRIFTGATE"))},
        "DRIFTGATE__SERVING__SAMPLE_STORE_URL": postgres_urls[0],
        "DRIFTGATE__SERVING__CONTROL_STORE_URL": postgres_urls[1],
        "DRIFTGATE_ADMIN_TOKEN": ADMIN_TOKEN,
    }
    config = str(Path(registered.config.root) / "driftgate.yaml")
    log_path = tmp_path / "service.log"
    registered.set_champion("1")
    with open(log_path, "wb") as log:
        service = _driftgate(
            "serve", "--port", str(port), "--verbose", "-c", config,
            env=env, cwd=tmp_path, stdout=log, stderr=subprocess.STDOUT,
        )  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            assert service.poll() is None, log_path.read_text()[-3000:]
            try:
                if httpx.get(f"{base}/readyz", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, log_path.read_text()[-3000:]
            time.sleep(0.3)
        records = records_of(registered.rows, 0, 2)
        assert httpx.post(f"{base}/predict", json={"records": records}).status_code == 200
        httpx.post(
            f"{base}/predict",
            content=b'{"records": [{"temperature": 1e999}]}',
            headers={"Content-Type": "application/json"},
        )
        httpx.post(f"{base}/admin/pause", json={"reason": "x"}, headers=admin_headers("wrong"))
        outputs = []
        for command in (["pause", "--reason", "drill"], ["resume", "--reason", "drill", "--log"]):
            done = _driftgate(
                *command, "-c", config, env=env, cwd=tmp_path,
                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            )  # fmt: skip
            output, _ = done.communicate(timeout=120)
            assert done.returncode == 0, output
            outputs.append(output)
        assert "PAUSED: drill" in outputs[0]
    finally:
        service.send_signal(signal.SIGTERM)
        service.wait(timeout=60)
    text = log_path.read_text()
    assert "serving served v1" in text and "inference PAUSED: drill" in text  # its own log
    assert_clean(text, "the service log")
    for output in outputs:
        assert_clean(output, "CLI output")
