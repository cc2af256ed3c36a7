"""The third status of a gate check: not applicable (neither a pass nor a failure).

An input the gate marks :class:`NotApplicable` (an adopted model has no state dict)
makes every check that needs it report ``NOT_APPLICABLE`` with the reason: in the
table, JSON, JUnit and Markdown, never as a pass, and without failing the gate.
"""

from __future__ import annotations

import json
from xml.etree import ElementTree

import numpy as np

from driftgate.gates.checks import GateInputs, NotApplicable, run_checks
from driftgate.gates.result import CheckResult, GateResult, not_applicable

NO_MODULE = NotApplicable("adopted model: no state dict")


def inputs(**fields) -> GateInputs:
    rows = np.random.default_rng(0).normal(size=(64, 3)).astype(np.float32)
    return GateInputs(predict=lambda x: np.full(len(x), 0.5), rows=rows, n_features=3, **fields)


def test_checks_needing_a_not_applicable_input_report_it_with_the_reason():
    results = {
        r.name: r for r in run_checks("model_checks", inputs(model=NO_MODULE, rebuild=NO_MODULE))
    }
    for name in ("reload_parity", "export_parity", "registry_parity"):
        assert results[name].not_applicable and not results[name].passed
        assert results[name].status == "NOT_APPLICABLE"
        assert results[name].message == "adopted model: no state dict"
    # an input neither given nor marked not applicable still fails, naming it
    overfitting = results["overfitting"]
    assert overfitting.failed and "train_metrics" in overfitting.message


def test_not_applicable_neither_passes_nor_fails_the_gate():
    passing = CheckResult("latency", True, "1 ms", "<= 200 ms")
    skipped = not_applicable("reload_parity", "adopted model: no state dict")
    result = GateResult("m", "3", None, [passing, skipped])
    assert result.passed and result.failures == [] and result.not_applicable == [skipped]
    # only not-applicable checks: nothing was shown to pass, so the gate does not pass
    assert not GateResult("m", "3", None, [skipped]).passed
    failing = CheckResult("memory", False, "900 MB", "<= 512 MB", "too much")
    assert GateResult("m", "3", None, [passing, skipped, failing]).failures == [failing]


def test_every_report_shows_the_status(tmp_path):
    skipped = not_applicable("reload_parity", "adopted model: no state dict")
    result = GateResult("m", "3", None, [CheckResult("latency", True, "1 ms", "-"), skipped])
    files = result.write(tmp_path)
    checks = json.loads(files["json"].read_text())["checks"]
    assert [(c["status"], c["passed"]) for c in checks] == [
        ("PASS", True),
        ("NOT_APPLICABLE", False),
    ]
    assert "NOT_APPLICABLE  adopted model: no state dict" in result.table()
    assert "| reload_parity | - | - | NOT_APPLICABLE | adopted model: no state dict |" in (
        files["markdown"].read_text()
    )
    suite = ElementTree.fromstring(files["junit"].read_text())
    assert suite.get("skipped") == "1" and suite.get("failures") == "0"
    [case] = [c for c in suite if c.get("name") == "reload_parity"]
    assert case.find("skipped") is not None and case.find("failure") is None
