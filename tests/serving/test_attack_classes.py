"""The eight classes of break found by the attack on the running service (issue 18),
each over real HTTP to a real uvicorn service, on real SQLite files and, where the
class involves the store, a real PostgreSQL database.

2. a commit slower than the handler's wait no longer kills the sample writer;
3. 503 answers carry a stable message and an error id, never driver text (which
   quoted other clients' request ids, features and the INSERT);
4. a deleted or replaced store stops acknowledging; the pause switch follows the
   store the CLI writes;
8. a body with a million bad fields gets a small, capped reply and ``/healthz`` keeps
   answering meanwhile;
9. a read-only store is not ready, and serving resumes once it is writable again;
10. admin: out-of-range window bounds and blank reasons are 422 naming the field, a
    locked control store is 503 with an error id, authentication comes before the
    body, an oversized Authorization header is refused before any comparison, a
    token with a trailing newline works (and is warned about);
also: a reused ``X-Request-ID`` is refused with 409 (one copy stored), duplicate JSON
keys are refused with 400 naming the key.
"""

from __future__ import annotations

import contextlib
import hmac
import json
import logging
import re
import sqlite3
import subprocess
import threading
import time
import uuid
from pathlib import Path

import httpx
import psycopg
import pytest

from driftgate.config.serving import ServingSettings
from driftgate.stores.control import ControlStore
from driftgate.stores.samples import SqlSampleStore
from tests.driftgate.stores.conftest import POSTGRES_ADMIN_URL, _postgres_database
from tests.serving.conftest import (
    ADMIN_TOKEN,
    ThreadedService,
    admin_headers,
    admin_token_env,
    records_of,
    wait_for,
)

# Serial in make test: it asserts /healthz answers within 3 s, recoveries within 1 s.
pytestmark = pytest.mark.serial


def sqlite_settings(folder: Path, **extra) -> ServingSettings:
    return ServingSettings(
        sample_store_url=f"sqlite:///{folder / 'samples.db'}",
        control_store_url=f"sqlite:///{folder / 'control.db'}",
        model_poll_seconds=60,
        pause_poll_seconds=0.2,
        **extra,
    )


def stored_ids(url: str) -> set[str]:
    store = SqlSampleStore(url)
    try:
        return store.request_ids()
    finally:
        store.close()


@contextlib.contextmanager
def write_lock(path: Path):
    """Hold SQLite's write lock on ``path`` from another connection, as another process would."""
    holder = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    holder.execute("BEGIN IMMEDIATE")
    try:
        yield
    finally:
        holder.execute("ROLLBACK")
        holder.close()


def chattr(flag: str, *paths: Path) -> None:
    subprocess.run(["chattr", flag, *map(str, paths)], check=True)


def ready(service) -> bool:
    return service.client.get("/readyz").status_code == 200


# -- 2. a slow commit ------------------------------------------------------------------


def test_a_commit_slower_than_the_wait_leaves_the_writer_running(registered, tmp_path, monkeypatch):
    from driftgate.serving.routers import predict

    monkeypatch.setattr(predict, "COMMIT_TIMEOUT_SECONDS", 0.5)
    settings = sqlite_settings(tmp_path)
    record = {"records": records_of(registered.rows, 0, 1)}
    registered.set_champion("1")
    with ThreadedService(registered.config, settings) as service:
        assert service.client.post("/predict", json=record).status_code == 200
        with write_lock(tmp_path / "samples.db"):
            # The commit waits for the lock longer than the handler waits for the commit.
            slow = service.client.post("/predict", json=record)
            assert slow.status_code == 503, slow.text
            time.sleep(2.0)
        # The lock is gone: the service serves and stores again, without a restart.
        wait_for(lambda: ready(service), what="/readyz after the lock")
        after = service.client.post("/predict", json=record, headers={"X-Request-ID": "after-1"})
        assert after.status_code == 200, after.text
        assert after.json()["sample_stored"] is True
        assert service.state.writer.alive
        assert service.client.get("/healthz").status_code == 200
        assert "after-1" in stored_ids(settings.sample_store_url)


# -- 3 and 9 on PostgreSQL: a read-only database -----------------------------------------


@pytest.fixture
def postgres_url():
    yield from _postgres_database()


def _set_read_only(url: str, on: bool) -> None:
    """Make the database read-only for new sessions, and end the current ones (the
    service's pool reconnects, as after a failover to a standby)."""
    name = url.rsplit("/", 1)[1]
    with psycopg.connect(POSTGRES_ADMIN_URL, autocommit=True) as admin:
        setting = (
            "SET default_transaction_read_only = on"
            if on
            else "RESET default_transaction_read_only"
        )
        admin.execute(f'ALTER DATABASE "{name}" {setting}')
        admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s", (name,)
        )


def test_a_read_only_database_is_not_ready_and_its_503s_leak_nothing(
    registered, tmp_path, postgres_url, caplog
):
    caplog.set_level(logging.ERROR)
    settings = ServingSettings(
        sample_store_url=postgres_url,
        control_store_url=f"sqlite:///{tmp_path / 'control.db'}",
        model_poll_seconds=60,
        pause_poll_seconds=0.2,
    )
    registered.set_champion("1")
    records = records_of(registered.rows, 0, 2)
    with ThreadedService(registered.config, settings) as service:
        assert service.client.post("/predict", json={"records": records}).status_code == 200
        _set_read_only(postgres_url, True)
        answers = []

        def client(name: str) -> None:
            with httpx.Client(base_url=service.url, timeout=30) as own:
                answers.append(
                    own.post("/predict", json={"records": records}, headers={"X-Request-ID": name})
                )

        threads = [threading.Thread(target=client, args=(f"client-{i}",)) for i in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        for answer in answers:
            assert answer.status_code == 503, answer.text
            for leak in (
                "INSERT",
                "parameters",
                "[SQL",
                "client-",
                "psycopg",
                "read-only transaction",
            ):
                if leak == "client-":  # its own id is fine; another client's is not
                    others = {f"client-{i}" for i in range(4)} - {answer.json()["request_id"]}
                    assert not any(other in answer.text for other in others), answer.text
                else:
                    assert leak not in answer.text, answer.text
            error_id = answer.json().get("error_id")
            if error_id:  # the detail is in the server log under the same id
                assert error_id in caplog.text
        # Readiness says so, cheaply (the watch re-checks every second).
        not_ready = wait_for(
            lambda: (r := service.client.get("/readyz")).status_code == 503 and r, what="not ready"
        )
        assert "read-only" in not_ready.text
        _set_read_only(postgres_url, False)
        wait_for(lambda: ready(service), what="ready again")
        again = service.client.post(
            "/predict", json={"records": records}, headers={"X-Request-ID": "pg-after"}
        )
        assert again.status_code == 200 and again.json()["sample_stored"] is True
    assert "pg-after" in stored_ids(postgres_url)


# -- 9 on SQLite: an immutable file --------------------------------------------------------


def test_an_immutable_sqlite_store_is_not_ready_then_serves_again(registered, tmp_path):
    settings = sqlite_settings(tmp_path)
    database = tmp_path / "samples.db"
    record = {"records": records_of(registered.rows, 0, 1)}
    registered.set_champion("1")
    with ThreadedService(registered.config, settings) as service:
        assert service.client.post("/predict", json=record).status_code == 200
        chattr("+i", database)
        try:
            wait_for(lambda: not ready(service), what="not ready while read-only")
            assert "read-only" in service.client.get("/readyz").text
            refused = service.client.post("/predict", json=record)
            assert refused.status_code == 503
            assert "read-only" in refused.json()["detail"]
        finally:
            chattr("-i", database)
        wait_for(lambda: ready(service), what="ready once writable")
        again = service.client.post("/predict", json=record, headers={"X-Request-ID": "rw-again"})
        assert again.status_code == 200 and again.json()["sample_stored"] is True
    assert "rw-again" in stored_ids(settings.sample_store_url)


# -- 4. a store that vanishes ------------------------------------------------------------


def _delete_sqlite(path: Path) -> None:
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)


def test_a_deleted_sample_store_stops_acknowledging(registered, tmp_path):
    settings = sqlite_settings(tmp_path)
    record = {"records": records_of(registered.rows, 0, 1)}
    registered.set_champion("1")
    with ThreadedService(registered.config, settings) as service:
        assert service.client.post("/predict", json=record).status_code == 200
        _delete_sqlite(tmp_path / "samples.db")
        answers = [
            service.client.post("/predict", json=record, headers={"X-Request-ID": f"gone-{i}"})
            for i in range(20)
        ]
        acknowledged = [a for a in answers if a.status_code == 200]
        assert not acknowledged, f"{len(acknowledged)} acknowledged into a deleted file"
        assert all(a.status_code == 503 for a in answers)
        assert "deleted" in answers[0].json()["detail"]
        wait_for(lambda: not ready(service), what="not ready", timeout=5)
        assert "deleted" in service.client.get("/readyz").text


def test_the_pause_switch_is_read_from_the_store_the_cli_writes(registered, tmp_path):
    settings = sqlite_settings(tmp_path)
    record = {"records": records_of(registered.rows, 0, 1)}
    registered.set_champion("1")
    with ThreadedService(registered.config, settings) as service:
        assert service.client.post("/predict", json=record).status_code == 200
        _delete_sqlite(tmp_path / "control.db")
        # Deleted and not yet re-created: the switch is unknown, nothing is answered.
        wait_for(
            lambda: service.client.post("/predict", json=record).status_code == 503,
            what="503 while the control store is gone",
        )
        # `driftgate pause` opens the store at its URL (creating the file) and pauses.
        cli = ControlStore(settings.control_store_url)
        cli.pause(registered.config.model.name, reason="drill after a restore", actor="cli:test")
        cli.close()
        paused = wait_for(
            lambda: (r := service.client.post("/predict", json=record)).json().get("paused") and r,
            what="the CLI's pause to apply",
        )
        assert paused.status_code == 503 and paused.json()["reason"] == "drill after a restore"


def test_a_re_created_postgres_database_stops_acknowledging(registered, tmp_path):
    database = _postgres_database()
    url = next(database)
    name = url.rsplit("/", 1)[1]
    settings = ServingSettings(
        sample_store_url=url,
        control_store_url=f"sqlite:///{tmp_path / 'control.db'}",
        model_poll_seconds=60,
        pause_poll_seconds=0.2,
    )
    record = {"records": records_of(registered.rows, 0, 1)}
    registered.set_champion("1")
    try:
        with ThreadedService(registered.config, settings) as service:
            assert service.client.post("/predict", json=record).status_code == 200
            with psycopg.connect(POSTGRES_ADMIN_URL, autocommit=True) as admin:
                admin.execute(f'DROP DATABASE "{name}" WITH (FORCE)')
                admin.execute(f'CREATE DATABASE "{name}"')
            SqlSampleStore(url).close()  # another service creates the tables in the new one
            answers = [
                service.client.post("/predict", json=record, headers={"X-Request-ID": f"new-{i}"})
                for i in range(5)
            ]
            assert [a.status_code for a in answers] == [503] * 5, [a.text for a in answers]
            wait_for(lambda: not ready(service), what="not ready")
            # A check that ran while the database was dropped and not yet re-created says
            # "cannot be reached"; the next one (a second later) names the replacement.
            wait_for(
                lambda: "replaced" in service.client.get("/readyz").text,
                timeout=10,
                what="/readyz to name the replaced database",
            )
        assert not stored_ids(url) & {f"new-{i}" for i in range(5)}
    finally:
        next(database, None)


# -- 8. error amplification ---------------------------------------------------------------


@pytest.fixture(scope="module")
def service(registered, tmp_path_factory):
    folder = tmp_path_factory.mktemp("attack-stores")
    registered.set_champion("1")
    with ThreadedService(registered.config, sqlite_settings(folder)) as running:
        running.folder = folder
        yield running


def _healthz_latencies(url: str, stop: threading.Event, latencies: list[float]) -> None:
    with httpx.Client(base_url=url, timeout=60) as client:
        while not stop.is_set():
            began = time.perf_counter()
            client.get("/healthz")
            latencies.append(time.perf_counter() - began)
            time.sleep(0.02)


@pytest.mark.parametrize("fields", [1650, 1000])
def test_a_million_bad_fields_get_a_small_reply_and_healthz_keeps_answering(
    service, registered, fields
):
    base = records_of(registered.rows, 0, 1)[0]
    record = {**base, **{f"x{i:x}": 1 for i in range(fields)}}  # short names: many per MB
    body = json.dumps({"records": [record] * 1000}, separators=(",", ":")).encode()
    stop, latencies = threading.Event(), []
    watcher = threading.Thread(target=_healthz_latencies, args=(service.url, stop, latencies))
    watcher.start()
    time.sleep(0.2)
    began = time.perf_counter()
    answer = httpx.post(
        f"{service.url}/predict",
        content=body,
        headers={"Content-Type": "application/json"},
        timeout=120,
    )
    seconds = time.perf_counter() - began
    stop.set()
    watcher.join()
    print(f"\n{len(body) / 1e6:.1f} MB body, {fields} unknown fields x 1000 records: "
          f"{answer.status_code}, {len(answer.content)} B reply in {seconds:.2f} s; "
          f"/healthz max {max(latencies) * 1000:.0f} ms")  # fmt: skip
    assert answer.status_code in (400, 422), answer.text[:300]
    assert len(answer.content) < 64 * 1024
    # Before the fix /healthz stalled for the whole request (21 s, 33 s); what is left is
    # the thread pool's share of the GIL on two cores shared with other processes.
    assert max(latencies) < 3.0, f"/healthz stalled {max(latencies):.2f} s"
    problems = answer.json()["errors"]
    assert problems and len(problems) <= 100
    if answer.status_code == 422:  # within the key bound: every field counted
        assert len(problems) + answer.json()["errors_omitted"] == 1000 * fields
    else:
        assert f"{len(record)} keys" in problems[0]["reason"]


# -- 10. admin -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"reason": "x", "window_start": "9999-12-31T23:59:59+00:00"}, "window_start"),
        ({"reason": "x", "window_end": "0001-01-01T00:00:00"}, "window_end"),
        ({"reason": "   "}, "reason"),
    ],
)
def test_bad_admin_fields_are_422_naming_the_field(service, body, field):
    answer = service.client.post("/admin/pause", json=body, headers=admin_headers())
    assert answer.status_code == 422, answer.text
    assert [e["field"] for e in answer.json()["errors"]] == [field]
    assert (
        service.client.get("/admin/state", headers=admin_headers()).json()["state"]["paused"]
        is False
    )


def test_a_blank_resume_reason_is_422(service):
    answer = service.client.post("/admin/resume", json={"reason": "\t"}, headers=admin_headers())
    assert answer.status_code == 422 and answer.json()["errors"][0]["field"] == "reason"


def test_a_locked_control_store_is_503_with_an_error_id(service, monkeypatch, caplog):
    from driftgate.serving.routers import admin

    monkeypatch.setattr(admin, "LOCK_WAIT_MS", 300, raising=False)
    caplog.set_level(logging.ERROR)
    with write_lock(service.folder / "control.db"):
        answer = service.client.post(
            "/admin/pause", json={"reason": "while locked"}, headers=admin_headers()
        )
    assert answer.status_code == 503, answer.text
    error_id = answer.json()["error_id"]
    assert error_id in answer.json()["detail"] and error_id in caplog.text
    assert "locked" not in answer.text  # the driver's words stay in the log


def test_authentication_comes_before_the_body(service):
    for content in (b"{not json", b'{"reason": 5}', b"\xff\xfe"):
        answer = service.client.post(
            "/admin/pause", content=content, headers={"Content-Type": "application/json"}
        )
        assert answer.status_code == 401, (content, answer.text)


def test_an_oversized_authorization_header_is_refused_unread(service, monkeypatch):
    compared = []
    real = hmac.compare_digest
    monkeypatch.setattr(hmac, "compare_digest", lambda a, b: compared.append(1) or real(a, b))
    long = service.client.get("/admin/state", headers={"Authorization": "Bearer " + "a" * 4096})
    assert long.status_code == 401 and "longer than" in long.json()["detail"]
    assert not compared
    # 64 MiB in the attack; past the head limit the server refuses it while it arrives.
    huge = httpx.get(
        f"{service.url}/admin/state",
        headers={"Authorization": "Bearer " + "a" * (8 * 1024 * 1024)},
        timeout=60,
    )
    assert huge.status_code == 431
    assert not compared
    assert service.client.get("/healthz").status_code == 200


def test_a_keep_alive_request_after_an_unread_body_is_not_counted_as_a_head(service):
    """The head limit counts bytes only while the parser is inside a head. When a
    response goes out before its request's body was read (a 404 here, a 413 or a 503
    elsewhere), the next request's head and the start of its body can arrive in the
    same read as the end of that body: its body was then counted as head and a client
    on a kept-alive connection got 431 (seen as a flaky failure of the fuzz test of
    oversized bodies)."""
    import socket

    body = b"x" * 600_000  # several reads: the server reads at most 256 KiB at a time
    pipelined = (
        b"GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n"
        + b"POST /no-such-path HTTP/1.1\r\nHost: t\r\n"
        + b"Content-Type: application/octet-stream\r\n"
        + b"Content-Length: %d\r\n\r\n" % len(body)
        + body
        + b"GET /healthz HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n"
    )
    with socket.create_connection(("127.0.0.1", service.port), timeout=30) as connection:
        connection.sendall(pipelined)
        received = b""
        with contextlib.suppress(ConnectionResetError):  # a server that refuses resets
            while chunk := connection.recv(65536):
                received += chunk
    statuses = re.findall(rb"HTTP/1\.1 (\d{3}) ", received)
    assert statuses == [b"200", b"404", b"200"], received[-300:]


def test_a_token_with_a_trailing_newline_still_works(registered, tmp_path, caplog):
    caplog.set_level(logging.WARNING)
    registered.set_champion("1")
    service = ThreadedService(registered.config, sqlite_settings(tmp_path))
    with admin_token_env(ADMIN_TOKEN + "\n"):
        # ThreadedService sets the plain token while it starts: start it by hand.
        service.thread.start()
        wait_for(lambda: service.server.started, timeout=60, what="uvicorn")
    try:
        with httpx.Client(base_url=service.url, timeout=30) as client:
            answer = client.get("/admin/state", headers=admin_headers())
        assert answer.status_code == 200, answer.text
        assert "whitespace" in caplog.text and ADMIN_TOKEN not in caplog.text
    finally:
        service.server.should_exit = True
        service.thread.join(timeout=30)


# -- request ids and duplicate keys ---------------------------------------------------------


def test_a_reused_request_id_is_refused_and_stored_once(service, registered):
    record = {"records": records_of(registered.rows, 0, 2)}
    reused = f"reused-{uuid.uuid4().hex[:8]}"
    first = service.client.post("/predict", json=record, headers={"X-Request-ID": reused})
    second = service.client.post("/predict", json=record, headers={"X-Request-ID": reused})
    assert first.status_code == 200 and second.status_code == 409, second.text
    assert "X-Request-ID" in second.json()["detail"]
    racing = f"racing-{uuid.uuid4().hex[:8]}"
    statuses = []

    def post() -> None:
        with httpx.Client(base_url=service.url, timeout=30) as own:
            statuses.append(
                own.post("/predict", json=record, headers={"X-Request-ID": racing}).status_code
            )

    threads = [threading.Thread(target=post) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(statuses) == [200] + [409] * 7
    window = SqlSampleStore(f"sqlite:///{service.folder / 'samples.db'}").read_window(
        "2000-01-01", "2100-01-01"
    )
    assert (window.request_id == reused).sum() == 2  # one request of two records
    assert (window.request_id == racing).sum() == 2


def test_duplicate_json_keys_are_400_naming_the_key(service, registered):
    record = records_of(registered.rows, 0, 1)[0]
    name = next(iter(record))
    text = json.dumps({"records": [record]})
    duplicated = text.replace(f'"{name}": ', f'"{name}": 1.0, "{name}": ', 1)
    answer = service.client.post(
        "/predict", content=duplicated, headers={"Content-Type": "application/json"}
    )
    assert answer.status_code == 400, answer.text
    assert answer.json()["errors"][0]["field"] == "body"
    assert repr(name) in answer.json()["errors"][0]["reason"]
    top = service.client.post(
        "/predict",
        content=b'{"records": [], "records": ' + json.dumps([record]).encode() + b"}",
        headers={"Content-Type": "application/json"},
    )
    assert top.status_code == 400 and "'records'" in top.json()["errors"][0]["reason"]
