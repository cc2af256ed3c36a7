"""Contract revision with a person in the loop (issue 29), end to end: a real service
refuses records past the contract's sea-level pressure range; a review of the refused
traffic carries the proposed revision; ``driftgate contract revise --from-review ID``
shows it and changes nothing; with ``--accept`` it writes the next contract version
and tags the champion, and the running service then accepts what it refused, over
real HTTP, without a restart."""

from __future__ import annotations

import shutil

import pandas as pd
import pytest
from typer.testing import CliRunner

from driftgate import registry
from driftgate.cli import app
from driftgate.config import load_config
from driftgate.data_contracts import Contract
from driftgate.jobs.contract_revision import PROPOSAL_PREFIX, proposal_evidence
from driftgate.stores.factories import review_store
from tests.conftest import REPO_ROOT, mlflow_client
from tests.serving.conftest import ThreadedService, records_of, wait_for

runner = CliRunner()
SHIFT = 2.0  # added to sea-level pressure: past the contract's max of 0.81
REFUSED, SERVED = 30, 30


@pytest.fixture
def project(trained_model, project_dir, tmp_path):
    """The shared project's config and model with a home of this test's own, served
    with the champion polled every 0.2 s."""
    text = (project_dir / "driftgate.yaml").read_text()
    text = text.replace("home: state", f"home: {tmp_path / 'home'}")
    text = text.replace("params: params.yaml", f"params: {project_dir / 'params.yaml'}")
    text = text.replace("gates: gates/gates.yaml", f"gates: {project_dir / 'gates/gates.yaml'}")
    text = text.replace("  port: 8765", "  port: 8765\n  model_poll_seconds: 0.2")
    assert "model_poll_seconds: 0.2" in text and str(tmp_path) in text
    path = tmp_path / "driftgate.yaml"
    path.write_text(text)
    config = load_config(path)
    version = trained_model.outcome.registered.version
    mlflow_client(config.tracking.uri).set_registered_model_alias(
        config.model.name, registry.CHAMPION_ALIAS, version
    )
    return path, config, version


def cli(*args: str):
    result = runner.invoke(app, list(args))
    return result.exit_code, result.output


def refused_traffic(trained_model) -> tuple[list[dict], list[dict]]:
    """Test-split records that pass the contract, and as many again past its sea-level
    pressure range."""
    rows = trained_model.data.splits.test[list(trained_model.data.features)]
    good = records_of(rows.reset_index(drop=True), 0, REFUSED + SERVED)
    shifted = [{**r, "sea_level_pressure": r["sea_level_pressure"] + SHIFT} for r in good]
    return good, [r for r in shifted if r["sea_level_pressure"] > 0.81][:REFUSED]


def review_refusals(config, version: str, service, good, shifted) -> str:
    """Send ``shifted`` (refused) and ``good`` (served) through ``service``, then open the
    refused-traffic review with its proposal as the drift check does; its id."""
    post = service.client.post
    start = pd.Timestamp.now(tz="UTC") - pd.Timedelta(minutes=5)
    for record in shifted:
        assert post("/predict", json={"records": [record]}).status_code == 422
    for record in good[:SERVED]:
        assert post("/predict", json={"records": [record]}).status_code == 200
    end = pd.Timestamp.now(tz="UTC") + pd.Timedelta(minutes=5)
    reviews = review_store(config)
    try:
        wait_for(lambda: len(proposal_evidence(config, start, end)) > 1, what="the samples")
        review = reviews.open_or_update(
            model_name=config.model.name, model_version=version,
            monitor="rejected-traffic", metric="rejected_share", window_start=start,
            window_end=end, observed=0.5, threshold=0.02, features=[], evidence=[],
        )  # fmt: skip
        reviews.add_evidence(
            review.review.id, proposal_evidence(config, start, end, review.review.id)
        )
    finally:
        reviews.close()
    return review.review.id


def test_a_revision_is_shown_then_accepted_and_the_service_accepts_what_it_refused(
    project, trained_model
):
    path, config, version = project
    good, shifted = refused_traffic(trained_model)
    contract_path = config.contract_in_effect()
    assert contract_path.name == "rainfall.yaml"
    with ThreadedService(config, config.serving) as service:
        post = service.client.post
        review_id = review_refusals(config, version, service, good, shifted)
        tagged_before = registry_tags(config, version).get(registry.TAG_CONTRACT)

        code, shown = cli("reviews", "show", review_id, "--config", str(path))
        assert code == 0, shown
        assert PROPOSAL_PREFIX in shown and "columns.sea_level_pressure.max: 0.81 -> " in shown
        assert f"driftgate contract revise --from-review {review_id} --accept" in shown

        # Without --accept (and no terminal to ask on): shown, nothing written or tagged.
        code, proposed = cli(
            "contract", "revise", "--from-review", review_id, "--config", str(path)
        )
        assert code == 0, proposed
        assert "columns.sea_level_pressure.max: 0.81 -> " in proposed
        assert "nothing changed" in proposed
        assert sorted(p.name for p in config.contract_revisions_dir.glob("*.yaml")) == []
        # The version keeps the contract tag it had (the shared model is tagged by
        # other tests of this session too): showing tags nothing.
        assert registry_tags(config, version).get(registry.TAG_CONTRACT) == tagged_before
        assert post("/predict", json={"records": shifted[:1]}).status_code == 422

        code, accepted = cli(
            "contract", "revise", "--from-review", review_id, "--accept", "--by", "tester",
            "--config", str(path),
        )  # fmt: skip
        assert code == 0, accepted
        written = config.contract_revisions_dir / "rainfall.v2.yaml"
        assert f"wrote {written}" in accepted
        revised = Contract.load(written)
        assert revised.version == 2 and revised.columns["sea_level_pressure"].max > max(
            r["sea_level_pressure"] for r in shifted
        )
        assert Contract.load(contract_path).version == 1  # the old version is kept
        assert registry_tags(config, version)[registry.TAG_CONTRACT] == "rainfall v2"
        assert load_config(path).data.contract == str(written)  # in effect for every reader

        # The running service follows the contract in effect at its next poll.
        wait_for(lambda: service.client.get("/readyz").json()["contract"] == written.name,
                 what="the service to apply the revision")  # fmt: skip
        answered = post("/predict", json={"records": shifted})
        assert answered.status_code == 200, answered.text
        assert len(answered.json()["probabilities"]) == len(shifted)

    reviews = review_store(config)
    try:
        resolved = reviews.get(review_id)
    finally:
        reviews.close()
    assert resolved.status == "resolved" and resolved.resolved_by == "tester"
    assert str(written) in resolved.resolution
    # Accepted once: the same review proposes nothing more against the new version.
    code, again = cli("contract", "revise", "--from-review", review_id, "--config", str(path))
    assert code == 0 and "nothing to widen" in again, again


def registry_tags(config, version: str) -> dict:
    model = mlflow_client(config.tracking.uri).get_model_version(config.model.name, version)
    return dict(model.tags)


def test_an_unknown_review_is_a_one_line_usage_error(project):
    path, _, _ = project
    code, output = cli("contract", "revise", "--from-review", "rv-nope", "--config", str(path))
    assert code == 2 and output.strip().startswith("error: ") and "rv-nope" in output
    assert "Traceback" not in output


def test_the_packaged_contract_is_never_written_beside(project):
    """The demo's contract ships in the package: its revisions go to the home."""
    _, config, _ = project
    assert config.contract_revisions_dir == config.home_dir / "contracts"
    assert shutil.os.path.samefile(
        config.contract_in_effect(), REPO_ROOT / "data_contracts" / "rainfall.yaml"
    )


def test_a_pinned_service_contract_is_said_when_a_revision_is_accepted(project, trained_model):
    """``serving.contract`` pins a file, which a revision does not move: accepting one
    says so on the command's output and on the review, where the person reads it."""
    path, _, version = project
    pinned = REPO_ROOT / "data_contracts" / "rainfall.yaml"
    text = path.read_text().replace(
        "  model_poll_seconds: 0.2", f"  model_poll_seconds: 0.2\n  contract: {pinned}"
    )
    path.write_text(text)
    config = load_config(path)
    assert config.serving.contract == str(pinned)
    good, shifted = refused_traffic(trained_model)
    with ThreadedService(config, config.serving) as service:
        review_id = review_refusals(config, version, service, good, shifted)
    code, accepted = cli(
        "contract", "revise", "--from-review", review_id, "--accept", "--by", "tester",
        "--config", str(path),
    )  # fmt: skip
    assert code == 0, accepted
    assert f"the service does NOT apply it: serving.contract pins {pinned}" in accepted
    reviews = review_store(config)
    try:
        evidence = reviews.get(review_id).evidence
    finally:
        reviews.close()
    assert any("serving.contract pins" in line for line in evidence)


def test_a_proposal_that_changed_since_it_was_shown_is_not_written(project, trained_model):
    """The Prefect form can wait for days while the review takes new windows: what the
    person read is what is written, or nothing is (``shown``)."""
    from driftgate.jobs.contract_revision import RevisionError, accept_revision, propose_for_review

    _, config, version = project
    good, shifted = refused_traffic(trained_model)
    with ThreadedService(config, config.serving) as service:
        review_id = review_refusals(config, version, service, good, shifted)
    _, revision = propose_for_review(config, review_id)
    read = revision.diff_lines()
    stale = [read[0], "  columns.sea_level_pressure.max: 0.81 -> 1.00 (an older window)"]
    with pytest.raises(RevisionError, match="changed since it was shown; nothing written"):
        accept_revision(config, review_id, by="ana", shown=stale)
    assert list(config.contract_revisions_dir.glob("*.yaml")) == []
    accepted = accept_revision(config, review_id, by="ana", shown=read)
    assert accepted.path.name == "rainfall.v2.yaml" and accepted.path.is_file()
