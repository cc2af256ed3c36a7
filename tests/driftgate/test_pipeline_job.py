"""Files the DVC stages pass on: the candidate file and the gate summary."""

import json

import pytest

from driftgate.gates.result import CheckResult, GateResult
from driftgate.jobs.pipeline import read_candidate_file, write_candidate_file, write_gate_summary
from driftgate.training.data import DataError


def test_candidate_file_round_trips_the_registered_version(trained_model, tmp_path):
    path = write_candidate_file(trained_model.outcome, tmp_path / "models" / "candidate.json")
    record = read_candidate_file(path)
    registered = trained_model.outcome.registered
    assert record["model_uri"] == registered.model_uri
    assert record["version"] == registered.version
    assert record["run_id"] == registered.run_id
    assert record["data_md5"] == trained_model.data.data_md5
    assert record["data_path"] == trained_model.data.data_path


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "candidate file not found"),
        ("{not json", "not valid JSON"),
        ("[1]", "expected a JSON object"),
        (json.dumps({"model_name": "m", "version": 3}), "version, run_id, model_uri"),
    ],
)
def test_a_bad_candidate_file_is_named_with_what_is_wrong(tmp_path, content, message):
    path = tmp_path / "candidate.json"
    if content is not None:
        path.write_text(content)
    with pytest.raises(DataError, match=message) as error:
        read_candidate_file(path)
    assert str(path) in str(error.value)


def test_gate_summary_holds_only_numbers_and_booleans(tmp_path):
    result = GateResult("m", "7", "6")
    result.checks += [CheckResult("a", True, "1", "1"), CheckResult("b", False, "2", "1")]
    summary = json.loads(write_gate_summary(result, False, tmp_path / "promote.json").read_text())
    assert summary == {
        "passed": False,
        "promoted": False,
        "candidate": 7,
        "checks": 2,
        "failed_checks": 1,
    }
