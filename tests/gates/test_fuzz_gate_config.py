"""Fuzzing the gate config loader: any file loads or raises ConfigError naming it.

Hypothesis mutates the committed ``gates/gates.yaml`` (values of any type, deleted and
unknown keys, NaN/inf thresholds, ...), corrupts its bytes and writes hostile
documents. ``load_gate_config`` must return a GateConfig whose numbers are all finite
(a NaN monitor threshold never breaches: a silent pass) or raise ``ConfigError``
whose message starts with the file name.
"""

from __future__ import annotations

import pytest
from hypothesis import given

from driftgate.core.yamlconfig import ConfigError
from driftgate.gates.config import default_gates_path, load_gate_config
from tests.yaml_mutations import FUZZ, assert_loads_or_config_error, write, yaml_files

REAL = default_gates_path().read_text(encoding="utf-8")
TOP_KEYS = ["promotion", "model_checks", "monitors"]


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return tmp_path_factory.mktemp("fuzz-gates")


@FUZZ
@given(data=yaml_files(REAL, TOP_KEYS))
def test_gate_files_load_or_raise_config_error_naming_the_file(folder, data):
    path = write(folder / "gates.yaml", data)
    assert_loads_or_config_error(load_gate_config, path)


MONITOR = (
    "monitors:\n- {name: m, metric: kl, schedule: '* * * * *', action: notify, threshold: %s}\n"
)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (MONITOR % ".nan", "monitors.0.threshold: Input should be a finite number"),
        (MONITOR % ".inf", "monitors.0.threshold: Input should be a finite number"),
        ("promotion:\n  metrics:\n  - {metric: accuracy, greater_is_better: true, "
         "threshold: .nan}\n", "promotion.metrics.0.threshold: Input should be a finite"),
        ("model_checks:\n  latency: {p95_ms: .inf}\n", "p95_ms: Input should be a finite"),
        ("monitors: " + "[" * 20_000 + "]" * 20_000, "nested too deeply"),
        ("model_checks:\n  memory: {batch_size: " + "9" * 5000 + "}\n", "4300 digits"),
        ('monitors:\n- {name: "a\\0", metric: kl, threshold: 1, schedule: "* * * * *", '
         "action: notify}\n", "monitors.0.name: text contains a NUL"),
    ],
)  # fmt: skip
def test_regressions_found_by_fuzzing(folder, text, message):
    """Loaded (NaN/inf thresholds) or raised RecursionError/ValueError before the fixes
    that came with these tests."""
    path = write(folder / "regression.yaml", text.encode("utf-8"))
    with pytest.raises(ConfigError, match=message) as raised:
        load_gate_config(path)
    assert str(raised.value).startswith(f"{path}: ")
