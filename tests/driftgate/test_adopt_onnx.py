"""Adopting a model that is not torch: an MLflow ONNX model (``mlflow.onnx.log_model``),
loaded without unpickling (onnxruntime), through adopt -> gate -> serve -> drift-check.

The ONNX model is a tiny torch module exported with ``torch.onnx.export``, as a team
converting its model to ONNX would; driftgate never sees the torch module. A pickled
pyfunc stays refused, saying what to do instead.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from driftgate import registry

MODEL = "onnx-external"
FEATURES = ["x0", "x1", "x2", "x3"]
GATES = """
promotion:
  split: test
  metrics:
    - {metric: roc_auc, greater_is_better: true, threshold: 0.9, min_absolute_change: -0.05}
model_checks:
  finite_outputs: {edge_samples: 64}
  signature: {}
  output_shape: {}
  degenerate_output: {max_single_class_share: 0.98}
  latency: {batch_sizes: [1, 64], repeats: 5, p50_ms: 500, p95_ms: 5000}
  memory: {batch_size: 500, max_peak_mb: 512}
  environment: {require_same: [python, torch], level: minor}
  reload_parity: {}
  export_parity: {format: onnx}
  registry_parity: {}
  overfitting: {metric: roc_auc}
monitors:
  - {name: mean-shift-kl, metric: kl, features: all, threshold: 0.3, schedule: "0 * * * *",
     window: 1h, action: open_review, consecutive_breaches: 1}
"""


def _onnx_model(frame: pd.DataFrame):
    """A logistic regression fitted in torch and exported to ONNX (P(class 1) per row)."""
    import torch
    from torch import nn

    torch.manual_seed(0)
    net = nn.Linear(len(FEATURES), 1)
    x = torch.as_tensor(frame[FEATURES].to_numpy(np.float32))
    y = torch.as_tensor(frame["y"].to_numpy(np.float32))
    optimiser = torch.optim.Adam(net.parameters(), lr=0.1)
    for _ in range(100):
        optimiser.zero_grad()
        nn.functional.binary_cross_entropy_with_logits(net(x).squeeze(-1), y).backward()
        optimiser.step()

    class Probability(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.net = net

        def forward(self, rows: torch.Tensor) -> torch.Tensor:
            return torch.sigmoid(self.net(rows)).squeeze(-1)

    program = torch.onnx.export(
        Probability().eval(), (x[:3],), dynamo=True, report=False, verbose=False,
        dynamic_shapes=({0: torch.export.Dim("batch", min=1)},),
    )  # fmt: skip
    return program.model_proto


@pytest.fixture(scope="module")
def adopted(project_config, tmp_path_factory):
    import mlflow

    from driftgate.config import load_config
    from driftgate.jobs import adopt as job

    root = tmp_path_factory.mktemp("adopt-onnx")
    rng = np.random.default_rng(0)
    frame = pd.DataFrame(rng.normal(size=(300, 4)).round(4), columns=FEATURES)
    frame["y"] = (frame["x0"] + 0.3 * rng.normal(size=300) > 0).astype(int)
    frame.to_csv(root / "reference.csv", index=False)
    (root / "gates.yaml").write_text(GATES)
    tracking = project_config.tracking  # the session's store, a model of its own
    (root / "driftgate.yaml").write_text(
        f"home: state\nmodel:\n  name: {MODEL}\ngates: gates.yaml\n"
        f"tracking:\n  uri: {tracking.uri}\n  artifact_location: {tracking.artifact_location}\n"
        "data:\n  source: reference.csv\n  target: y\n  reference_rows: 300\n"
    )
    config = load_config(root / "driftgate.yaml")
    # Runs logged "elsewhere" go to the project's experiment: MLflow's Default one would
    # put their artifacts in ./mlruns of the working directory.
    experiment_id = registry.connect(config.tracking)
    example = np.zeros((3, len(FEATURES)), np.float32)
    with mlflow.start_run(experiment_id=experiment_id):
        logged = mlflow.onnx.log_model(
            _onnx_model(frame.iloc[:210]),
            name="model",
            input_example=example,
            # mlflow.onnx infers no signature from an example: give it, as for any model
            signature=mlflow.models.infer_signature(example, np.zeros(3, np.float32)),
            pip_requirements=["onnx"],  # not inferred in a child process (~2 CPU-s)
            registered_model_name=MODEL,
        )
    version = str(logged.registered_model_version)
    outcome = job.run_adoption(config, f"models:/{MODEL}/{version}", root / "reference.csv")
    return {
        "root": root, "config": config, "version": version, "outcome": outcome,
        "experiment_id": experiment_id,
    }  # fmt: skip


def test_an_onnx_model_passes_the_allow_list_and_is_adopted(adopted):
    from driftgate import modelguard

    outcome = adopted["outcome"]
    assert outcome.changed and outcome.features == FEATURES
    assert outcome.metrics["reference_roc_auc"] > 0.95
    info = registry.version_info(adopted["config"].tracking, MODEL, adopted["version"])
    assert info.environment["model_format"] == "onnx" and "torch" not in info.environment
    model = registry.load_pyfunc(adopted["config"].tracking, outcome.model_uri)
    assert isinstance(model, registry.OnnxPyfunc)
    assert model.predict(np.zeros((5, 4), np.float32)).shape == (5,)
    assert modelguard.ONNX_FILE == "model.onnx"


def test_the_gate_runs_every_check_that_applies_and_torch_only_ones_are_not_applicable(adopted):
    from driftgate.gates.config import load_gate_config
    from driftgate.jobs import promote as promote_job

    config = adopted["config"]
    outcome = promote_job.run_promotion(config, load_gate_config(config.gates), adopted["version"])
    checks = {c.name: c for c in outcome.result.checks}
    torch_only = {"reload_parity", "export_parity", "registry_parity"}
    training_only = {"overfitting", "data_version"}
    assert {n for n, c in checks.items() if c.not_applicable} == torch_only | training_only
    ran = set(checks) - torch_only - training_only
    assert {"signature", "output_shape", "finite_outputs", "environment"} <= ran
    assert all(checks[n].passed for n in ran), [checks[n] for n in ran if not checks[n].passed]
    assert "torch not applicable (onnx: not run by torch)" in checks["environment"].observed
    assert outcome.promoted


def test_the_onnx_champion_is_served_and_drift_checked(adopted):
    from driftgate.gates.config import load_gate_config
    from driftgate.jobs.drift_check import judge_recent
    from tests.serving.conftest import ThreadedService

    config = adopted["config"]
    rng = np.random.default_rng(1)
    production = pd.DataFrame(rng.normal(size=(120, 4)).round(4), columns=FEATURES)
    production["x0"] += 2.0  # the injected shift
    records = [{k: float(v) for k, v in row.items()} for row in production.to_dict("records")]
    with ThreadedService(config, config.serving) as service:
        response = service.client.post("/predict", json={"records": records})
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["model_version"] == adopted["version"]
    assert len(body["probabilities"]) == 120 and all(0 <= p <= 1 for p in body["probabilities"])
    [verdict] = judge_recent(config, load_gate_config(config.gates), window="1h")
    assert verdict.rows == 120 and verdict.breached == ["mean-shift-kl"]
    assert verdict.results[0].breached_features == ["x0"]


@pytest.mark.parametrize(
    ("serialization", "refusal"),
    [("cloudpickle", "a pickled model"), ("skops", "a model outside the allow-list")],
)
def test_a_scikit_learn_model_stays_refused_saying_to_log_it_as_onnx(
    adopted, serialization, refusal
):
    """The allow-list did not widen: a pickled (or skops) scikit-learn pyfunc is refused
    before it is read, and the refusal says why and what to do instead."""
    import mlflow
    from sklearn.linear_model import LogisticRegression

    from driftgate.jobs import adopt as job

    frame = pd.read_csv(adopted["root"] / "reference.csv")
    model = LogisticRegression().fit(frame[FEATURES], frame["y"])
    with mlflow.start_run(experiment_id=adopted["experiment_id"]):
        logged = mlflow.sklearn.log_model(
            model, name="model", registered_model_name=MODEL, serialization_format=serialization,
            pip_requirements=["scikit-learn"],  # not inferred in a child process (~2 CPU-s)
        )  # fmt: skip
    uri = f"models:/{MODEL}/{logged.registered_model_version}"
    with pytest.raises(registry.UnsafeModelError) as refused:
        job.run_adoption(adopted["config"], uri, adopted["root"] / "reference.csv")
    message = str(refused.value)
    assert f"{uri}: refusing to load {refusal}: " in message
    reasons = [str(f) for f in refused.value.findings]
    assert (
        "MLmodel: python_function.loader_module: 'mlflow.sklearn'; only 'mlflow.pytorch' may load"
        in reasons
    )
    assert "any other model as ONNX with mlflow.onnx.log_model" in message
    assert refused.value.exit_code == 3


def _saved_onnx(folder, domain: str = "", weights: int = 4):
    """An MLflow ONNX model folder of sigmoid(x @ w) built with onnx.helper."""
    import mlflow
    from onnx import TensorProto, helper, numpy_helper

    w = numpy_helper.from_array(np.ones((4, weights), np.float32), "w")
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["z"]),
        helper.make_node("Sigmoid", ["z"], ["p"], domain=domain),
    ]
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, 4])],
        [helper.make_tensor_value_info("p", TensorProto.FLOAT, [None, weights])], [w],
    )  # fmt: skip
    opsets = [helper.make_opsetid("", 20)] + ([helper.make_opsetid(domain, 1)] if domain else [])
    model = helper.make_model(graph, opset_imports=opsets)
    # Requirements given: not inferred by loading the model in a child process (~1 CPU-s).
    mlflow.onnx.save_model(model, str(folder), pip_requirements=["onnx"])
    return folder


def test_the_onnx_rules_refuse_custom_operators_escaping_data_and_mixed_flavours(tmp_path):
    import onnx
    import yaml

    from driftgate import modelguard

    assert modelguard.inspect_model_folder(_saved_onnx(tmp_path / "plain")) == []
    big = _saved_onnx(tmp_path / "big", weights=600)  # tensors saved as external data
    assert len(list(big.iterdir())) > 5 and modelguard.inspect_model_folder(big) == []

    custom = modelguard.inspect_model_folder(_saved_onnx(tmp_path / "custom", "com.evil"))
    assert [str(f) for f in custom] == [
        "model.onnx: graph: operator com.evil::Sigmoid is not standard ONNX nor a function the "
        "model defines (custom operators load native code)",
        "model.onnx: opset import of domain 'com.evil' (not standard ONNX)",
    ]

    escape = _saved_onnx(tmp_path / "escape", weights=600)
    proto = onnx.load(str(escape / "model.onnx"), load_external_data=False)
    for entry in proto.graph.initializer[0].external_data:
        if entry.key == "location":
            entry.value = "../outside.data"
    (escape / "model.onnx").write_bytes(proto.SerializeToString())
    assert any(
        "tensor 'w': external data '../outside.data' is not a plain file" in str(f)
        for f in modelguard.inspect_model_folder(escape)
    )

    mixed = _saved_onnx(tmp_path / "mixed")
    meta = yaml.safe_load((mixed / "MLmodel").read_text())
    meta["flavors"]["pytorch"] = {"model_data": "data", "serialization_format": "pickle"}
    meta["flavors"]["python_function"]["loader_module"] = "mlflow.pytorch"
    (mixed / "MLmodel").write_text(yaml.safe_dump(meta))
    assert {str(f) for f in modelguard.inspect_model_folder(mixed)} == {
        "MLmodel: flavour 'pytorch' is not allowed (only onnx, python_function)",
        "MLmodel: python_function.loader_module: 'mlflow.pytorch'; only 'mlflow.onnx' may load",
    }


def test_a_second_version_is_gated_against_an_adopted_champion(adopted):
    """The champion (v of the fixture, promoted above) was adopted: it has no weights
    folder, and the candidate is still scored against it on the same rows."""
    import mlflow

    from driftgate.gates.config import load_gate_config
    from driftgate.jobs import adopt as job
    from driftgate.jobs import promote as promote_job

    config, root = adopted["config"], adopted["root"]
    frame = pd.read_csv(root / "reference.csv")
    example = np.zeros((3, len(FEATURES)), np.float32)
    with mlflow.start_run(experiment_id=adopted["experiment_id"]):
        logged = mlflow.onnx.log_model(
            _onnx_model(frame.iloc[:150]), name="model", input_example=example,
            signature=mlflow.models.infer_signature(example, np.zeros(3, np.float32)),
            registered_model_name=MODEL, pip_requirements=["onnx"],
        )  # fmt: skip
    candidate = str(logged.registered_model_version)
    job.run_adoption(config, f"models:/{MODEL}/{candidate}", root / "reference.csv")
    result = promote_job.evaluate_gates(config, load_gate_config(config.gates), candidate)
    assert result.champion == adopted["version"] != candidate
    # scored against the champion on the same rows (it failed: no weights folder to read)
    [versus] = [c for c in result.checks if c.name == "test_roc_auc_vs_champion_abs"]
    assert " vs " in versus.observed, versus


# -- the ONNX allow-list's gaps (issue 28, 11) ---------------------------------------------


def _rewrite(folder, edit):
    import onnx

    proto = onnx.load(str(folder / "model.onnx"), load_external_data=False)
    edit(proto)
    (folder / "model.onnx").write_bytes(proto.SerializeToString())
    return folder


def _escaping_sparse(tensor_name: str):
    """A sparse tensor whose values are external data at ``../outside.data``."""
    from onnx import TensorProto, helper

    values = helper.make_tensor(f"{tensor_name}_values", TensorProto.FLOAT, [1], [0.0])
    values.ClearField("float_data")
    values.data_location = TensorProto.EXTERNAL
    values.external_data.add(key="location", value="../outside.data")
    indices = helper.make_tensor(f"{tensor_name}_indices", TensorProto.INT64, [1], [0])
    return helper.make_sparse_tensor(values, indices, [4])


def test_external_data_in_a_sparse_initializer_or_attribute_is_checked(tmp_path):
    """Failed before: only dense initializers and tensor attributes were walked, so a
    ``../`` path inside a sparse tensor passed (onnxruntime itself refused that one)."""
    from onnx import helper

    from driftgate import modelguard

    initializer = _rewrite(
        _saved_onnx(tmp_path / "sparse-init"),
        lambda proto: proto.graph.sparse_initializer.append(_escaping_sparse("s")),
    )
    assert [str(f) for f in modelguard.inspect_model_folder(initializer)] == [
        "model.onnx: graph sparse initializer: tensor 's_values': external data "
        "'../outside.data' is not a plain file of the model's folder"
    ]

    def sparse_constant(proto):
        node = helper.make_node("Constant", [], ["c"], sparse_value=_escaping_sparse("a"))
        proto.graph.node.insert(0, node)

    attribute = _rewrite(_saved_onnx(tmp_path / "sparse-attr"), sparse_constant)
    (finding,) = modelguard.inspect_model_folder(attribute)
    assert "Constant.sparse_value: tensor 'a_values': external data '../outside.data'" in str(
        finding
    )


def test_a_dummy_local_function_does_not_admit_its_domains_operators(tmp_path):
    """Failed before: any domain some local function was declared in was admitted, so a
    dummy ``com.microsoft`` function let every ``com.microsoft`` operator through."""
    from onnx import helper

    from driftgate import modelguard

    def dummy_function_and_contrib_node(proto):
        dummy = helper.make_function(
            "com.microsoft", "Dummy", ["a"], ["b"], [helper.make_node("Identity", ["a"], ["b"])],
            [helper.make_opsetid("", 20)],
        )  # fmt: skip
        proto.functions.append(dummy)
        proto.opset_import.append(helper.make_opsetid("com.microsoft", 1))
        proto.graph.node[1].domain = "com.microsoft"  # Sigmoid -> com.microsoft::Sigmoid

    folder = _rewrite(_saved_onnx(tmp_path / "dummy"), dummy_function_and_contrib_node)
    assert {str(f) for f in modelguard.inspect_model_folder(folder)} == {
        "model.onnx: function com.microsoft::Dummy: declared in a domain onnxruntime "
        "implements natively",
        "model.onnx: graph: operator com.microsoft::Sigmoid is not standard ONNX nor a function "
        "the model defines (custom operators load native code)",
    }


def test_a_custom_operator_inside_a_subgraph_or_function_body_is_refused(tmp_path):
    """Nodes of ``If`` branches and of local function bodies are held to the same rule."""
    from onnx import TensorProto, helper

    from driftgate import modelguard

    def nested(proto):
        branch = helper.make_graph(
            [helper.make_node("Relu", ["z"], ["r"], domain="com.evil")], "branch", [],
            [helper.make_tensor_value_info("r", TensorProto.FLOAT, None)],
        )  # fmt: skip
        body = helper.make_node("Custom", ["a"], ["b"], domain="com.evil")
        proto.functions.append(
            helper.make_function(
                "local.fn", "Fn", ["a"], ["b"], [body], [helper.make_opsetid("com.evil", 1)]
            )
        )
        proto.graph.node.append(
            helper.make_node("If", ["flag"], ["out"], then_branch=branch, else_branch=branch)
        )

    folder = _rewrite(_saved_onnx(tmp_path / "nested"), nested)
    reasons = sorted(str(f) for f in modelguard.inspect_model_folder(folder))
    assert any("graph/If.then_branch: operator com.evil::Relu" in r for r in reasons), reasons
    assert any("graph/If.else_branch: operator com.evil::Relu" in r for r in reasons), reasons
    assert any("function local.fn::Fn: operator com.evil::Custom" in r for r in reasons), reasons
