"""Issue 28, class 12: what the admin endpoints (and the CLI, and the drift check) may
write into the pause switch, over real HTTP against a real service on SQLite stores.

Before: 10 MB of evidence was accepted and repeated in every paused 503; a line break or
a terminal escape in ``reason`` or ``by`` went into the service's log line as it was
("inference PAUSED: <reason> (by <actor>)"), forging a line; a window ending before it
starts was accepted. The rules live in driftgate/stores/control.py.
"""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy.dialects.sqlite import insert

from driftgate.stores.control import (
    MAX_EVIDENCE_LINKS,
    MAX_LINK_CHARS,
    MAX_NAME_CHARS,
    MAX_REASON_CHARS,
    ControlStore,
    state_table,
)
from tests.serving.conftest import (
    ThreadedService,
    admin_headers,
    local_settings,
    records_of,
    wait_for,
)

# A bound on a paused 503 (bytes): the largest cause the rules accept, every character
# an astral one that the ASCII-escaped JSON writes as 12 bytes, is 218 KB.
MAX_PAUSED_503_BYTES = 256 * 1024
FORGED_LINE = "2026-12-07 00:00:00 WARNING driftgate.serving.pause: inference resumed"
DRIFTGATE = str(Path(sys.executable).with_name("driftgate"))


@pytest.fixture(scope="module")
def service(registered, tmp_path_factory):
    registered.set_champion("1")
    folder = tmp_path_factory.mktemp("admin-bodies")
    with ThreadedService(registered.config, local_settings(folder)) as running:
        running.folder = folder
        yield running


@pytest.fixture(autouse=True)
def running_again(service):
    yield
    service.client.post("/admin/resume", json={"reason": "test over"}, headers=admin_headers())


def pause(service, **body):
    return service.client.post("/admin/pause", json=body, headers=admin_headers())


def paused(service) -> bool:
    answer = service.client.get("/admin/state", headers=admin_headers())
    return answer.json()["state"]["paused"]


def refused_fields(answer) -> list[str]:
    assert answer.status_code == 422, answer.text
    return [e["field"] for e in answer.json()["errors"]]


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"reason": "x" * (MAX_REASON_CHARS + 1)}, "reason"),
        ({"reason": "x", "evidence": ["runs:/r"] * (MAX_EVIDENCE_LINKS + 1)}, "evidence"),
        ({"reason": "x", "evidence": ["https://e/" + "a" * MAX_LINK_CHARS]}, "evidence"),
    ],
    ids=["reason", "evidence-links", "evidence-link-length"],
)
def test_admin_fields_over_their_caps_are_422_naming_the_field(service, body, field):
    assert refused_fields(pause(service, **body)) == [field]
    assert not paused(service)


def test_ten_megabytes_of_evidence_are_refused_before_they_are_read(service):
    body = {"reason": "x", "evidence": ["https://evidence/" + "a" * 10_000_000]}
    answer = pause(service, **body)
    assert answer.status_code == 413, answer.status_code
    assert answer.json()["errors"][0]["field"] == "body"
    assert "admin body limit" in answer.json()["errors"][0]["reason"]
    assert not paused(service)


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"reason": f"drift\n{FORGED_LINE}"}, "reason"),
        ({"reason": f"drift\r{FORGED_LINE}"}, "reason"),
        ({"reason": "drift \x1b[2K\x1b[1Gall clear"}, "reason"),  # erases the line shown
        ({"reason": "drift\u2028all clear"}, "reason"),
        ({"reason": "ok", "by": "alice\x1b]0;root\x07"}, "by"),
        ({"reason": "ok", "by": "alice\u202eecila"}, "by"),  # reorders what is displayed
        ({"reason": "ok", "evidence": ["https://e/1\nFAKE"]}, "evidence"),
    ],
    ids=["newline", "carriage-return", "ansi", "line-separator", "osc", "bidi", "evidence"],
)
def test_control_characters_are_422_naming_the_field(service, body, field, caplog):
    caplog.set_level(logging.WARNING, logger="driftgate")
    assert refused_fields(pause(service, **body)) == [field]
    if "evidence" not in body:
        resumed = service.client.post("/admin/resume", json=body, headers=admin_headers())
        assert refused_fields(resumed) == [field]
    assert not paused(service)
    assert not [r for r in caplog.records if "inference PAUSED" in r.getMessage()]


def test_a_window_that_ends_before_it_starts_is_422_naming_window_end(service):
    for end in ("2026-03-01T00:00:00+00:00", "2026-03-01T06:00:00+00:00"):  # before, equal
        answer = pause(
            service, reason="x", window_start="2026-03-01T06:00:00+00:00", window_end=end
        )
        assert refused_fields(answer) == ["window_end"]
        assert "after window_start" in answer.json()["errors"][0]["reason"]
    assert not paused(service)
    # control: a window that does end after its start (one bound naive, read as UTC)
    good = pause(
        service, reason="x", window_start="2026-03-01T05:00:00", window_end="2026-03-01T06:00Z"
    )
    assert good.status_code == 200, good.text


def paused_503(service, registered) -> bytes:
    answer = service.client.post("/predict", json={"records": records_of(registered.rows, 0, 1)})
    assert answer.status_code == 503, answer.text
    return answer.content


def test_the_largest_pause_the_rules_accept_gives_a_bounded_503(service, registered):
    astral = "\U0001f6a8"  # 12 bytes once ASCII-escaped: the worst case per character
    body = {
        "reason": astral * MAX_REASON_CHARS,
        "by": astral * MAX_NAME_CHARS,
        "monitor": astral * MAX_NAME_CHARS,
        "review_id": astral * MAX_NAME_CHARS,
        "evidence": [astral * MAX_LINK_CHARS] * MAX_EVIDENCE_LINKS,
        "window_start": "2026-03-01T00:00:00+00:00",
        "window_end": "2026-03-01T01:00:00+00:00",
    }
    sent = json.dumps(body).encode()  # ASCII-escaped too: the largest body the caps allow
    answer = service.client.post(
        "/admin/pause",
        content=sent,
        headers={**admin_headers(), "Content-Type": "application/json"},
    )
    assert answer.status_code == 200, answer.text[:300]
    size = len(paused_503(service, registered))
    print(f"admin body {len(sent):,} bytes; paused 503 {size:,} bytes")
    assert size <= MAX_PAUSED_503_BYTES


def test_a_cause_stored_before_the_rules_is_cut_and_escaped_in_every_503_and_log_line(
    service, registered, caplog
):
    """A switch written by an older version (or straight into the database): 10 MB of
    evidence in 40 links, a reason that forges a log line. The 503 repeats it within the
    bounds, and the service's log line escapes it."""
    caplog.set_level(logging.WARNING, logger="driftgate")
    links = ["https://evidence/" + "a" * 250_000] * 40
    stored = {
        "paused": True, "reason": f"drift\n{FORGED_LINE}", "actor": "old\x1b[2Kversion",
        "evidence": json.dumps(links), "since_us": 0,
    }  # fmt: skip
    store = ControlStore(f"sqlite:///{service.folder / 'control.db'}")
    try:  # one statement, so the service's poll sees the whole old state at once
        with store.engine.begin() as connection:
            connection.execute(
                insert(state_table)
                .values(model_name="served", **stored)
                .on_conflict_do_update(index_elements=["model_name"], set_=stored)
            )
    finally:
        store.close()
    body = wait_for(lambda: _paused_body(service, registered), what="the pause to apply")
    assert len(body) <= MAX_PAUSED_503_BYTES, len(body)
    answer = json.loads(body)
    assert answer["reason"] == "drift\\x0a" + FORGED_LINE
    assert len(answer["evidence"]) == MAX_EVIDENCE_LINKS and answer["evidence_omitted"] == 24
    assert all(len(link) == MAX_LINK_CHARS and link.endswith("…") for link in answer["evidence"])
    print(f"stored evidence {sum(map(len, links)):,} characters; paused 503 {len(body):,} bytes")
    assert answer["actor"] == "old\\x1b[2Kversion"
    # The pause can answer a request a moment before its poller writes the log line
    # (a CI run asserted in between and found no line): wait for the line as well.
    lines = wait_for(
        lambda: [r.getMessage() for r in caplog.records if "inference PAUSED" in r.getMessage()],
        what="the pause's log line",
    )
    assert lines and not [line for line in lines if "\n" in line or "\x1b" in line], lines


def _paused_body(service, registered) -> bytes | None:
    answer = service.client.post("/predict", json={"records": records_of(registered.rows, 0, 1)})
    return answer.content if answer.status_code == 503 else None


@pytest.mark.parametrize(
    ("option", "value", "field"),
    [
        ("--reason", f"drift\n{FORGED_LINE}", "reason"),
        ("--reason", "x" * (MAX_REASON_CHARS + 1), "reason"),
        ("--by", "ops\x1b[2K", "by"),
    ],
    ids=["reason-newline", "reason-length", "by-ansi"],
)
def test_the_cli_refuses_the_same_values_with_exit_2(tmp_path, option, value, field):
    (tmp_path / "driftgate.yaml").write_text("home: state\nmodel:\n  name: cli-model\n")
    args = [option, value] if option == "--reason" else ["--reason", "ok", option, value]
    for command in ("pause", "resume"):
        done = subprocess.run(
            [DRIFTGATE, command, *args, "--config", str(tmp_path / "driftgate.yaml")],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 2, (done.returncode, done.stderr[-500:])
        assert f"error: {field}: " in done.stderr, done.stderr[-500:]
        assert "Traceback" not in done.stderr
    store = ControlStore(f"sqlite:///{tmp_path / 'state' / 'control.db'}")
    try:
        assert not store.state("cli-model").paused and store.events("cli-model") == []
    finally:
        store.close()


def test_the_cli_escapes_a_cause_stored_before_the_rules(tmp_path):
    """Found in review: `driftgate pause` on an already paused model printed the stored
    reason and actor raw, so a state written before the rules put escape codes and a
    forged line on the operator's terminal."""
    (tmp_path / "driftgate.yaml").write_text("home: state\nmodel:\n  name: cli-model\n")
    (tmp_path / "state").mkdir()
    stored = {"paused": True, "reason": f"drift\n{FORGED_LINE}", "actor": "old\x1b[2Kversion",
              "evidence": "[]", "since_us": 0}  # fmt: skip
    store = ControlStore(f"sqlite:///{tmp_path / 'state' / 'control.db'}")
    try:
        with store.engine.begin() as connection:
            connection.execute(insert(state_table).values(model_name="cli-model", **stored))
    finally:
        store.close()
    done = subprocess.run(
        [DRIFTGATE, "pause", "--reason", "ok", "--config", str(tmp_path / "driftgate.yaml")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-500:]
    assert "already paused" in done.stdout
    assert "\x1b" not in done.stdout and FORGED_LINE not in done.stdout.splitlines()
    assert "old\\x1b[2Kversion" in done.stdout
