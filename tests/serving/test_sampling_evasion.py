"""Issue 28, class 3: a client that picks its own request ids cannot keep its traffic out
of the sample store when ``serving.sample_fraction`` < 1.

Sampling used to be an unkeyed hash (BLAKE2b) of the client's ``X-Request-ID``: anyone
could compute it, so a client sent 900 requests whose ids the hash excluded, none was
stored, and the drift check saw ``no_data``. The ids here are chosen exactly that way,
with the old function, and sent over real HTTP to a real service on a real SQLite store.
"""

from __future__ import annotations

import hashlib
import logging
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta

import pytest

from driftgate.config.serving import ServingSettings
from driftgate.stores.samples import SqlSampleStore
from tests.serving.conftest import ThreadedService, admin_headers, local_settings, records_of

FRACTION = 0.1
REQUESTS = 900  # the reported attack
REFUSED = 300


def unkeyed_is_sampled(request_id: str, fraction: float) -> bool:
    """The sampling decision before the fix, as it was in driftgate/stores/samples.py."""
    if fraction >= 1.0:
        return True
    digest = hashlib.blake2b(request_id.encode("utf-8", "surrogatepass"), digest_size=8)
    return int.from_bytes(digest.digest(), "big") < fraction * 2.0**64


def evasive_ids(prefix: str, count: int) -> list[str]:
    """``count`` ids that the old, unkeyed hash never logs at FRACTION."""
    ids, i = [], 0
    while len(ids) < count:
        if not unkeyed_is_sampled(candidate := f"{prefix}-{i}", FRACTION):
            ids.append(candidate)
        i += 1
    return ids


def binomial_bounds(n: int, p: float, sigmas: float = 5.0) -> tuple[float, float]:
    """Mean +- ``sigmas`` standard deviations of Binomial(n, p): outside it by chance
    about once in 1.7 million runs, while the old code stored 0."""
    mean, sd = n * p, (n * p * (1 - p)) ** 0.5
    return mean - sigmas * sd, mean + sigmas * sd


def request_ids(frame) -> set[str]:
    return set(frame["request_id"]) if len(frame) else set()  # an empty frame has no columns


@pytest.fixture
def settings(tmp_path) -> ServingSettings:
    return local_settings(tmp_path, sample_fraction=FRACTION)


def test_ids_chosen_against_the_old_hash_are_still_sampled_at_the_fraction(
    registered, settings, caplog
):
    registered.set_champion("1")
    accepted_ids = evasive_ids("evade", REQUESTS)
    refused_ids = evasive_ids("evade-bad", REFUSED)
    record = records_of(registered.rows, 0, 1)
    bad = [{**record[0], "sea_level_pressure": 5.0}]  # outside the contract's range
    start = datetime.now(UTC)
    caplog.set_level(logging.DEBUG, logger="driftgate")
    with ThreadedService(registered.config, settings) as running:

        def send(request_id: str, records: list[dict]):
            answer = running.client.post(
                "/predict", json={"records": records}, headers={"X-Request-ID": request_id}
            )
            return request_id, answer.status_code, answer.json()

        with ThreadPoolExecutor(8) as pool:  # concurrent, so group commits batch them
            answers = list(pool.map(lambda i: send(i, record), accepted_ids))
            refusals = list(pool.map(lambda i: send(i, bad), refused_ids))
        assert {status for _, status, _ in answers} == {200}
        assert {status for _, status, _ in refusals} == {422}
        said_sampled = {i for i, _, body in answers if body["sampled"]}

        store = SqlSampleStore(settings.sample_store_url)
        try:
            end = datetime.now(UTC) + timedelta(seconds=1)
            stored = request_ids(store.read_window(start, end))
            rejected = request_ids(store.read_rejected(start, end))
            stats = store.window_stats(start, end)
            print(f"stored {len(stored)} of {REQUESTS}, refusals {len(rejected)} of {REFUSED}")
            low, high = binomial_bounds(REQUESTS, FRACTION)
            assert low < len(stored) < high, f"{len(stored)} of {REQUESTS} evasive requests stored"
            low, high = binomial_bounds(REFUSED, FRACTION)
            assert low < len(rejected) < high, f"{len(rejected)} of {REFUSED} refusals stored"
            assert stored == said_sampled  # the answer's `sampled` is what was stored
            assert stats.rows == len(stored)
            assert stats.estimated_records == pytest.approx(len(stored) / FRACTION)
            # Another process opening the store decides every id as the service did.
            sampling = store.sampling(FRACTION)
            assert all(sampling.keeps(i) == (i in said_sampled) for i in accepted_ids)
        finally:
            store.close()

        # Labels for all 900: the service judges them by the decision it stored the
        # requests by: a logged request's label is accepted, another's is counted
        # unsampled (never a 404, never accepted without a sample).
        labels = [{"request_id": i, "record_index": 0, "label": 1} for i in accepted_ids]
        judged = running.client.post("/feedback", json=labels, headers=admin_headers())
        assert judged.status_code == 200, judged.text
        counts = judged.json()
        assert (counts["accepted"], counts["unsampled"]) == (len(stored), REQUESTS - len(stored))

        # The key decides what is logged: it is in no log line, answer or metric.
        key = running.state.samples._sampling_key.hex()
        shown = running.client.get("/metrics").text + running.client.get("/readyz").text
        assert key not in shown
    assert not [r for r in caplog.records if key in r.getMessage()]


def test_an_id_answered_unlogged_cannot_carry_more_traffic(registered, settings):
    """The next move once ids cannot be computed: probe for one id the service does not
    log (its answer says so), then send everything under it. An id names one request,
    logged or not: every reuse is a 409, nothing is answered unlogged under it again."""
    registered.set_champion("1")
    record = records_of(registered.rows, 0, 1)
    bad = [{**record[0], "sea_level_pressure": 5.0}]  # refused by the contract
    with ThreadedService(registered.config, settings) as running:

        def send(request_id: str, records: list[dict]):
            return running.client.post(
                "/predict", json={"records": records}, headers={"X-Request-ID": request_id}
            )

        probes = (f"probe-{n}" for n in range(200))
        unlogged = next(i for i in probes if send(i, record).json()["sampled"] is False)
        reused = [send(unlogged, record).status_code for _ in range(50)]
        # The same, with the id learnt from a refused request's answer.
        probes = (f"probe-bad-{n}" for n in range(200))
        learnt = next(i for i in probes if send(i, bad).json()["sample_stored"] is False)
        after_refusal = send(learnt, record).status_code
    assert reused == [409] * 50
    assert after_refusal == 409


def test_an_unverified_label_sender_cannot_learn_which_ids_are_logged(registered, settings):
    """Found in review: with ``feedback_auth: none`` a label for a never-served id was
    200 ``unsampled`` when the keyed hash skips the id and 404 when it keeps it, so any
    client could collect never-logged ids through /feedback and use each once on
    /predict. An unverified sender now gets the same answer for both."""
    from driftgate.stores.samples import SqlSampleStore

    open_settings = settings.model_copy(update={"feedback_auth": "none"})
    registered.set_champion("1")
    with ThreadedService(registered.config, open_settings) as running:
        store = SqlSampleStore(open_settings.sample_store_url)
        try:
            sampling = store.sampling(FRACTION)
        finally:
            store.close()
        candidates = [f"never-served-{n}" for n in range(400)]
        kept = [i for i in candidates if sampling.keeps(i)][:10]
        skipped = [i for i in candidates if not sampling.keeps(i)][:10]
        assert len(kept) == len(skipped) == 10

        def answer(request_id: str):
            label = [{"request_id": request_id, "record_index": 0, "label": 1}]
            response = running.client.post("/feedback", json=label)
            return response.status_code, response.json().get("unsampled")

        answers = {answer(i) for i in kept + skipped}
        # A verified sender still gets the 404 that tells an in-flight label to retry.
        verified = running.client.post(
            "/feedback",
            json=[{"request_id": kept[0], "record_index": 0, "label": 1}],
            headers=admin_headers(),
        )
    assert answers == {(200, 1)}, answers
    assert verified.status_code == 404
