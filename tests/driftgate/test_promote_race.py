"""Two promotions racing for ``champion`` on a real MLflow server: one wins, the other
refuses and says why, and the registry stays consistent.

Each round resets ``champion`` to the same version, then two threads, released by a
barrier at the same instant, promote two different candidates that both passed their
gate against that champion. MLflow aliases are last-writer-wins, so without the
champion lock both would report success; with it, the loser sees the winner's champion.
"""

from __future__ import annotations

import threading

import pytest
from mlflow import MlflowClient

from driftgate import registry
from driftgate.config import load_config
from driftgate.gates.result import CheckResult, GateResult
from driftgate.jobs import promote as promote_job
from tests.conftest import MlflowServer

MODEL = "raced"
ROUNDS = 4


@pytest.fixture(scope="module")
def raced(tmp_path_factory):
    """Three versions of one model on a real server."""
    root = tmp_path_factory.mktemp("race")
    server = MlflowServer(root)
    server.start()
    try:
        (root / "driftgate.yaml").write_text(
            f"home: {root / 'home'}\nmodel:\n  name: {MODEL}\ntracking:\n  uri: {server.uri}\n"
            f"serving:\n  control_store_url: sqlite:///{root / 'control.db'}\n"
        )
        config = load_config(root / "driftgate.yaml")
        client = MlflowClient(tracking_uri=server.uri, registry_uri=server.uri)
        client.create_registered_model(MODEL)
        # promote() moves aliases only; the versions need no model files behind them.
        run = client.create_run(client.create_experiment("race"))
        source = f"{run.info.artifact_uri}/model"
        versions = [
            client.create_model_version(MODEL, source, run_id=run.info.run_id).version
            for _ in range(3)
        ]
        yield {"config": config, "client": client, "versions": [str(v) for v in versions]}
    finally:
        server.stop()


def passed(candidate: str, champion: str) -> GateResult:
    """The gate's verdict as promote() receives it (the race is in moving the alias)."""
    result = GateResult(model_name=MODEL, candidate=candidate, champion=champion)
    result.checks.append(CheckResult("test_roc_auc", True, "0.87", ">= 0.80"))
    return result


def race(config, results: list[GateResult]) -> list[object]:
    barrier = threading.Barrier(len(results))
    outcomes: list[object] = [None] * len(results)

    def promote(index: int) -> None:
        barrier.wait()
        try:
            outcomes[index] = promote_job.promote(config, results[index])
        except Exception as exc:  # the loser's reason is the outcome under test
            outcomes[index] = exc

    threads = [threading.Thread(target=promote, args=(i,)) for i in range(len(results))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    return outcomes


def test_racing_promotions_have_one_winner_and_a_loser_that_says_why(raced):
    client, (champion, first, second) = raced["client"], raced["versions"]
    for _ in range(ROUNDS):
        client.set_registered_model_alias(MODEL, registry.CHAMPION_ALIAS, champion)
        if registry.PREVIOUS_CHAMPION_ALIAS in client.get_registered_model(MODEL).aliases:
            client.delete_registered_model_alias(MODEL, registry.PREVIOUS_CHAMPION_ALIAS)
        tags_before = {v: client.get_model_version(MODEL, v).tags for v in (first, second)}
        outcomes = race(raced["config"], [passed(first, champion), passed(second, champion)])
        winners = [i for i, o in enumerate(outcomes) if not isinstance(o, Exception)]
        assert len(winners) == 1, f"expected one winner, got {outcomes}"
        winner = (first, second)[winners[0]]
        (loser,) = [o for o in outcomes if isinstance(o, Exception)]
        assert isinstance(loser, registry.RegistryError)
        assert f"moved from {champion} to {winner}" in str(loser)
        assert "aliases unchanged" in str(loser)
        aliases = client.get_registered_model(MODEL).aliases
        assert aliases == {
            registry.CHAMPION_ALIAS: winner,
            registry.PREVIOUS_CHAMPION_ALIAS: champion,
        }
        # The loser wrote nothing: its refusal came before its first write.
        loser_version = second if winner == first else first
        assert client.get_model_version(MODEL, loser_version).tags == tags_before[loser_version]
        winner_tags = client.get_model_version(MODEL, winner).tags
        assert winner_tags[registry.TAG_PROMOTION_STATUS] == "promoted"
        assert winner_tags[registry.TAG_PROMOTION_PREVIOUS] == champion
