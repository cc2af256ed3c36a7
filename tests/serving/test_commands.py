"""``driftgate pause`` / ``resume`` (the functions the main CLI registers)."""

from __future__ import annotations

import typer
from typer.testing import CliRunner

from driftgate.commands.serve import pause, resume, serve
from driftgate.stores.control import ControlStore


def cli() -> typer.Typer:
    app = typer.Typer()
    for command in (serve, pause, resume):
        app.command()(command)
    return app


def test_pause_and_resume_write_the_durable_switch(tmp_path):
    (tmp_path / "driftgate.yaml").write_text("home: state\nmodel:\n  name: cli-model\n")
    config = ["--config", str(tmp_path / "driftgate.yaml")]
    runner = CliRunner()

    paused = runner.invoke(
        cli(), ["pause", "--reason", "upstream outage", "--review-id", "r-1", *config]
    )
    assert paused.exit_code == 0, paused.output
    assert "PAUSED: upstream outage" in paused.output
    store = ControlStore(f"sqlite:///{tmp_path / 'state' / 'control.db'}")
    state = store.state("cli-model")
    assert state.paused and state.review_id == "r-1" and state.actor.startswith("cli")

    again = runner.invoke(cli(), ["pause", "--reason", "second opinion", *config])
    assert "already paused" in again.output
    assert store.state("cli-model").reason == "upstream outage"

    resumed = runner.invoke(
        cli(), ["resume", "--reason", "outage over", "--by", "alice", "--log", *config]
    )
    assert resumed.exit_code == 0, resumed.output
    assert "resumed (outage over)" in resumed.output and "review r-1" in resumed.output
    assert not store.state("cli-model").paused
    assert [e.action for e in store.events("cli-model")] == ["resume", "pause", "pause"]

    idle = runner.invoke(cli(), ["resume", "--reason", "again", *config])
    assert idle.exit_code == 0 and "not paused" in idle.output


def test_resume_needs_a_reason(tmp_path):
    (tmp_path / "driftgate.yaml").write_text("home: state\n")
    result = CliRunner().invoke(cli(), ["resume", "--config", str(tmp_path / "driftgate.yaml")])
    assert result.exit_code == 2
