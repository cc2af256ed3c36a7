"""The gate-check registry: built-ins in report order, gates.yaml validated against it,
and a new check plugged in as one module."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from driftgate.core.yamlconfig import ConfigError
from driftgate.gates import checks
from driftgate.gates.checks import (
    CHECKS,
    GateCheck,
    GateInputs,
    configurable_checks,
    get_check,
    register,
    run_checks,
    unregister,
)
from driftgate.gates.checks.registry import CheckSettings
from driftgate.gates.config import load_gate_config
from driftgate.gates.result import CheckResult
from driftgate.training.model import Standardization, TabularClassifier, predict_proba
from tests.gates.plugin import docs_example_registered

BUILT_IN_MODEL_CHECKS = [
    "output_shape",
    "finite_outputs",
    "signature",
    "degenerate_output",
    "latency",
    "memory",
    "reload_parity",
    "export_parity",
    "registry_parity",
    "overfitting",
    "environment",
]


def load(tmp_path: Path, text: str):
    path = tmp_path / "gates.yaml"
    path.write_text(text)
    return load_gate_config(path)


@pytest.fixture
def own_checks():
    """Registers checks for one test only; the registry is as before afterwards."""
    before = dict(CHECKS)
    yield
    for name in [n for n in CHECKS if n not in before]:
        unregister(name)
    assert before == CHECKS


def test_built_in_checks_are_registered_in_report_order():
    assert list(CHECKS)[:13] == ["data_contract", "data_version", *BUILT_IN_MODEL_CHECKS]
    assert configurable_checks()[:11] == BUILT_IN_MODEL_CHECKS
    for check in CHECKS.values():
        # Every built-in check reads outputs through the task (shape, range, metric).
        assert check.applies_to == ("binary", "multiclass", "regression"), check.name
        assert check.summary and check.needs, check.name
        assert (check.group == "data") == (check.settings is None), check.name


def test_unknown_check_name_lists_the_known_ones():
    with pytest.raises(KeyError, match=r"unknown gate check 'latncy'; known checks: \[") as info:
        get_check("latncy")
    assert "'finite_outputs', 'signature'" in str(info.value)


def test_unknown_check_in_gates_yaml_names_the_key_and_lists_the_known_checks(tmp_path):
    with pytest.raises(ConfigError) as info:
        load(tmp_path, "model_checks:\n  latncy: {p95_ms: 10}\n")
    assert str(info.value) == (
        f"{tmp_path / 'gates.yaml'}: model_checks.latncy: unknown gate check 'latncy'; "
        "known checks: " + ", ".join(configurable_checks())
    )


def test_always_on_data_checks_have_no_settings(tmp_path):
    with pytest.raises(ConfigError, match=r"model_checks.data_version: .*always on"):
        load(tmp_path, "model_checks:\n  data_version: {enabled: false}\n")


def test_every_problem_of_model_checks_is_reported_at_once(tmp_path):
    text = (
        "model_checks:\n"
        "  latency: {p95_ms: -1, batch_sizes: [0]}\n"
        "  export_parity: {format: onnx2}\n"
        "  bogus: {}\n"
    )
    with pytest.raises(ConfigError) as info:
        load(tmp_path, text)
    keys = {line.split(": ")[1] for line in str(info.value).splitlines()}
    assert keys == {
        "model_checks.bogus",
        "model_checks.latency.p95_ms",
        "model_checks.latency.batch_sizes",
        "model_checks.export_parity.format",
    }


def test_omitted_checks_get_their_defaults_and_committed_config_loads():
    committed = load_gate_config()
    settings = committed.model_checks.settings()
    assert list(settings) == configurable_checks()
    assert settings["latency"].p95_ms == 2000
    assert committed.model_checks.latency is settings["latency"]
    assert settings["registry_parity"].max_abs_diff is None  # held to export_parity's bar


def test_register_refuses_duplicates_and_inputs_the_gate_does_not_have(own_checks):
    def run(inputs, settings):
        return CheckResult("x", True, "-", "-")

    with pytest.raises(ValueError, match="already registered"):
        register(GateCheck("latency", run, CheckSettings, needs=("rows",)))
    with pytest.raises(ValueError, match=r"needs unknown inputs \['held_out'\]"):
        register(GateCheck("x", run, CheckSettings, needs=("held_out",)))
    for clashing in ("settings", "model_dump", "not-an-identifier"):
        with pytest.raises(ValueError, match="must be an identifier"):
            register(GateCheck(clashing, run, CheckSettings, needs=("rows",)))
    with pytest.raises(ValueError, match="applies to no task"):
        register(GateCheck("x", run, CheckSettings, needs=("rows",), applies_to=()))


def test_checks_for_another_task_are_skipped_and_missing_inputs_fail(own_checks):
    def run(inputs, settings):
        return CheckResult("spread", True, "-", "-")

    register(GateCheck("regression_only", run, CheckSettings, ("rows",), ("regression",)))
    inputs = GateInputs(probabilities=np.array([0.2, 0.8]))
    results = {r.name: r for r in run_checks("model_checks", inputs)}
    assert "regression_only" not in results and "spread" not in results
    assert results["degenerate_output"].passed  # its one input was given
    latency = results["latency"]
    assert not latency.passed
    assert latency.message == "the gate did not provide predict, rows"


def test_disabled_checks_do_not_run(tmp_path):
    config = load(tmp_path, "model_checks:\n  degenerate_output: {enabled: false}\n")
    inputs = GateInputs(probabilities=np.array([0.2, 0.8]), settings=config.model_checks.settings())
    names = [r.name for r in run_checks("model_checks", inputs)]
    assert "degenerate_output" not in names and "finite_outputs" in names


def test_registry_parity_is_held_to_the_export_bar_unless_set(tmp_path):
    rows = np.random.default_rng(0).normal(size=(50, 3)).astype(np.float32)
    model = TabularClassifier(3, [4], 0.0, Standardization.fit(rows)).eval()
    base = {"predict": lambda r: predict_proba(model, r), "model": model, "rows": rows}
    for text, bar in (
        ("model_checks:\n  export_parity: {max_abs_diff: 0.25}\n", "<= 0.25"),
        ("model_checks:\n  registry_parity: {max_abs_diff: 0.5}\n", "<= 0.5"),
    ):
        settings = load(tmp_path, text).model_checks.settings()
        result = get_check("registry_parity").run(
            GateInputs(**base, settings=settings), settings["registry_parity"]
        )
        assert (result.threshold, result.passed) == (bar, True)


def test_a_check_is_one_new_module_validated_and_evaluated(tmp_path):
    """The docs' worked example, as a module of a package of the user's: importing the
    package registers it, gates.yaml validates its settings, the gate loop runs it."""
    with docs_example_registered(tmp_path) as modules:
        assert modules == ["prediction_spread"]
        assert configurable_checks()[-1] == "prediction_spread"
        with pytest.raises(
            ConfigError, match=r"model_checks.prediction_spread.min_std: .*greater than or equal"
        ):
            load(tmp_path, "model_checks:\n  prediction_spread: {min_std: -1}\n")
        config = load(tmp_path, "model_checks:\n  prediction_spread: {min_std: 0.05}\n")

        settings = config.model_checks.settings()
        flat = GateInputs(probabilities=np.full(100, 0.3), settings=settings)
        spread = run_checks("model_checks", flat)[-1]
        assert (spread.name, spread.passed, spread.threshold) == (
            "prediction_spread",
            False,
            ">= 0.05",
        )
        assert "base rate" in spread.message
        varied = GateInputs(probabilities=np.linspace(0, 1, 100), settings=settings)
        assert run_checks("model_checks", varied)[-1].passed
    assert "prediction_spread" not in CHECKS


def test_the_package_imports_every_module_in_it():
    """Every module of gates/checks/ is imported by the package, listed or not: a new
    check module needs no other file edited."""
    folder = Path(checks.__file__).parent
    modules = {p.stem for p in folder.glob("*.py") if not p.stem.startswith("_")} - {"registry"}
    assert set(checks.BUILT_IN) <= modules
    assert {m for m in modules if f"driftgate.gates.checks.{m}" in sys.modules} == modules
