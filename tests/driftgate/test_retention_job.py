"""Sample retention as a job, a command and a deployment plan (SQLite stores)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from typer.testing import CliRunner

from driftgate.cli import app
from driftgate.config import ProjectConfig
from driftgate.config.serving import ServingSettings
from driftgate.core.yamlconfig import ConfigError
from driftgate.jobs.retention import purge_samples
from driftgate.stores.factories import review_store
from driftgate.stores.samples import Sample, SqlSampleStore

NOW = datetime(2026, 6, 1, tzinfo=UTC)


def project(tmp_path, retention: str | None = "30d") -> ProjectConfig:
    return ProjectConfig(
        home=str(tmp_path / "home"),
        serving=ServingSettings(sample_retention=retention),
        root=tmp_path,
    )


def fill(config: ProjectConfig, now: datetime = NOW) -> SqlSampleStore:
    """One sample a day for the 60 days before ``now`` (request id ``r<days ago>``)."""
    store = SqlSampleStore(config.serving.sample_store(config.home_dir))
    store.append(
        [
            Sample(now - timedelta(days=d), f"r{d}", 0, "m", "1", {"a": float(d)}, 0.5, 1)
            for d in range(1, 61)
        ]
    )
    return store


def open_and_resolved_reviews(config: ProjectConfig, now: datetime = NOW) -> None:
    """An open review whose evidence is day 45's sample, a resolved one on day 50's."""
    reviews = review_store(config)
    reviews.open_or_update(
        model_name="m", model_version="1", monitor="kl", metric="kl",
        window_start=now - timedelta(days=45, hours=1),
        window_end=now - timedelta(days=44, hours=23), observed=0.3, threshold=0.1,
    )  # fmt: skip
    resolved = reviews.open_or_update(
        model_name="m", model_version="1", monitor="ks", metric="ks",
        window_start=now - timedelta(days=50, hours=1),
        window_end=now - timedelta(days=49, hours=23), observed=0.3, threshold=0.1,
    )  # fmt: skip
    reviews.resolve(resolved.review.id, by="test", resolution="fixed upstream")
    reviews.close()


def assert_purged_but_the_evidence(store: SqlSampleStore, deleted_rows: int) -> None:
    """Days 31..60 went (30d retention), but day 45: the open review's evidence."""
    assert deleted_rows == 30 - 1
    left = sorted(store.request_ids())
    assert "r45" in left and "r50" not in left and "r31" not in left and "r30" in left
    assert len(left) == 31


def test_old_samples_go_and_an_open_reviews_evidence_stays(tmp_path):
    config = project(tmp_path)
    store = fill(config)
    open_and_resolved_reviews(config)
    result = purge_samples(config, now=NOW)
    assert_purged_but_the_evidence(store, result.deleted_rows)


def test_retention_must_be_configured_and_valid(tmp_path):
    with pytest.raises(ConfigError, match="sample_retention is not set"):
        purge_samples(project(tmp_path, None))
    with pytest.raises(ValueError, match="not a retention"):
        ServingSettings(sample_retention="a month")
    with pytest.raises(ValueError, match="shorter than 1h"):
        ServingSettings(sample_retention="0h")


def test_the_purge_command_prints_what_went(tmp_path):
    (tmp_path / "driftgate.yaml").write_text("home: home\nserving:\n  sample_retention: 30d\n")
    config = project(tmp_path)
    fill(config)
    result = CliRunner().invoke(
        app, ["samples", "purge", "--now", NOW.isoformat(),
              "--config", str(tmp_path / "driftgate.yaml")],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert '"deleted_rows": 30' in result.output


def test_deploy_plans_an_hourly_retention_only_when_configured(tmp_path):
    from driftgate.gates.config import load_gate_config
    from driftgate.jobs.deploy import RETENTION_ENTRYPOINT, plan_deployments

    gates = load_gate_config()
    base = ProjectConfig(root=tmp_path)
    names = [p.full_name for p in plan_deployments(base, gates, config_path=None)]
    assert not any(n.startswith("sample-retention/") for n in names)
    config = base.model_copy(update={"serving": ServingSettings(sample_retention="30d")})
    plans = {p.full_name: p for p in plan_deployments(config, gates, config_path="/etc/d.yaml")}
    plan = plans[f"sample-retention/{config.model.name}"]
    assert plan.entrypoint == RETENTION_ENTRYPOINT and plan.cron == "17 * * * *"
    assert plan.parameters == {"config_path": "/etc/d.yaml"}
