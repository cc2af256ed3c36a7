"""Issue 28, class 12, below HTTP: the pause switch itself refuses what the admin bodies
refuse (so the CLI and any other writer cannot store it), and the drift check's pause,
composed from data driftgate does not control, is made to fit instead of refused.
Real SQLite and PostgreSQL stores (``store_url``)."""

from __future__ import annotations

import pytest

from driftgate.config import load_config
from driftgate.jobs import drift_check
from driftgate.stores.control import (
    MAX_EVIDENCE_LINKS,
    MAX_LINK_CHARS,
    MAX_NAME_CHARS,
    MAX_REASON_CHARS,
    ControlStore,
    ControlValueError,
)

FORGED = "x\n2026-12-07 00:00:00 WARNING driftgate.serving.pause: inference resumed"


@pytest.mark.parametrize(
    ("cause", "field"),
    [
        ({"reason": "y" * (MAX_REASON_CHARS + 1)}, "reason"),
        ({"reason": FORGED}, "reason"),
        ({"reason": "   "}, "reason"),
        ({"actor": "ops\x1b[2K"}, "by"),
        ({"actor": "a" * (MAX_NAME_CHARS + 1)}, "by"),
        ({"monitor": "kl\r"}, "monitor"),
        ({"review_id": "r\u202e1"}, "review_id"),
        ({"evidence": ["runs:/r"] * (MAX_EVIDENCE_LINKS + 1)}, "evidence"),
        ({"evidence": ["e" * (MAX_LINK_CHARS + 1)]}, "evidence"),
        ({"window_start": "2026-03-02", "window_end": "2026-03-01"}, "window_end"),
    ],
)
def test_the_switch_refuses_unbounded_or_log_forging_values(store_url, cause, field):
    store = ControlStore(store_url)
    try:
        with pytest.raises(ControlValueError) as refused:
            store.pause("m", **{"reason": "ok", "actor": "test", **cause})
        assert refused.value.field == field and refused.value.exit_code == 2
        assert str(refused.value).startswith(f"{field}: ")
        if set(cause) <= {"reason", "actor"}:
            with pytest.raises(ControlValueError):
                store.resume("m", **{"reason": "ok", "actor": "test", **cause})
        assert not store.state("m").paused and store.events("m") == []
    finally:
        store.close()


def test_the_drift_checks_pause_is_fitted_not_refused(store_url, tmp_path):
    # A breach on 400 features whose column names hold line breaks and escapes: the
    # reason (request.what) is long and would forge lines; the pause must still happen.
    (tmp_path / "driftgate.yaml").write_text(
        f"home: state\nmodel:\n  name: m\nserving:\n  control_store_url: '{store_url}'\n"
    )
    config = load_config(tmp_path / "driftgate.yaml")
    features = ", ".join(f"col{i}\n\x1b[31mFAKE" for i in range(400))
    change = drift_check._pause(
        config,
        "m",
        reason=f"kl: kl 3.2 > 0.5 on {features}",
        actor="monitor:drift-check",
        monitor="kl",
        window_start="2026-03-01",
        window_end="2026-03-02",
        evidence=["runs:/abc", "/reports/summary.md", *(["e" * 5_000] * 30)],
        review_id="r-1",
    )
    assert change.changed
    store = ControlStore(store_url)
    try:
        state = store.state("m")
    finally:
        store.close()
    assert state.paused and state.monitor == "kl" and state.review_id == "r-1"
    assert len(state.reason) == MAX_REASON_CHARS and state.reason.endswith("…")
    assert "\n" not in state.reason and "\x1b" not in state.reason
    assert "col0\\x0a\\x1b[31mFAKE" in state.reason
    assert len(state.evidence) == MAX_EVIDENCE_LINKS
    assert state.evidence[:2] == ("runs:/abc", "/reports/summary.md")
