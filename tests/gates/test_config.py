import pytest

from driftgate.core.yamlconfig import ConfigError
from driftgate.gates.config import default_gates_path, load_gate_config


def test_committed_config_has_the_two_rules_from_the_field():
    config = load_gate_config()
    rules = {m.name: m for m in config.monitors}
    kl = rules["mean-shift-kl"]
    assert (kl.metric, kl.threshold, kl.schedule, kl.action) == (
        "kl",
        0.1,
        "0 * * * *",
        "open_review",
    )
    missing = rules["missing-values"]
    assert (missing.metric, missing.threshold, missing.schedule, missing.action) == (
        "missing_share",
        0.05,
        "*/30 * * * *",
        "pause_inference",
    )
    assert config.model_checks.latency.p95_ms == 2000
    assert default_gates_path().name == "gates.yaml"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("promotion:\n  bogus: 1\n", r"gates.yaml: promotion.bogus: unknown key"),
        (
            "model_checks:\n  latency:\n    p95_ms: -1\n",
            r"model_checks.latency.p95_ms: .*greater than 0",
        ),
        (
            "model_checks:\n  export_parity:\n    format: onnx2\n",
            r"model_checks.export_parity.format",
        ),
        (
            "promotion:\n  metrics:\n    - metric: roc_auc\n      greater_is_better: true\n",
            r"promotion.metrics.0: .*at least one of threshold",
        ),
        (
            "monitors:\n"
            "  - {name: a, metric: kl, threshold: 1, schedule: '* * *', action: notify}\n",
            r"monitors.0.schedule: .*5 fields",
        ),
        (
            "monitors:\n"
            "  - {name: a, metric: kl, threshold: 1, schedule: '* * * * *', action: shout}\n",
            r"monitors.0.action: ",
        ),
        (
            "monitors:\n"
            "  - {name: a, metric: kl, threshold: 1, schedule: '* * * * *', action: notify}\n"
            "  - {name: a, metric: ks, threshold: 1, schedule: '* * * * *', action: notify}\n",
            r"monitors: .*unique: a",
        ),
    ],
)
def test_bad_gate_config_names_file_and_key(tmp_path, text, message):
    path = tmp_path / "gates.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=message):
        load_gate_config(path)


def test_the_demo_monitors_start_with_the_field_example_of_gates_yaml_unchanged():
    """``gates/demo.yaml`` repeats the two monitors of ``gates.yaml`` (a gate file holds
    its monitors whole); the copy must not drift from the original."""
    from driftgate.jobs.demo import ESTIMATED, OUTPUTS, REALIZED, RECEIVED, REFUSED

    field_example = load_gate_config().monitors
    demo = load_gate_config(default_gates_path().with_name("demo.yaml")).monitors
    assert demo[: len(field_example)] == field_example
    by_name = {m.name: m for m in demo}
    assert {REFUSED, RECEIVED, OUTPUTS, ESTIMATED, REALIZED} <= by_name.keys()  # the demo's table
    assert by_name[RECEIVED].population == "all"
    assert by_name[REALIZED].action == "retrain"
    assert by_name[REALIZED].retrain.cooldown_length.days == 30
