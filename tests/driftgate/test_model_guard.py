"""The model allow-list against hostile versions really registered in a real MLflow store.

One genuine model is trained and registered for the module; each hostile shape is a
copy of its files, edited, registered as a new version with the genuine tags. Every
payload writes a marker file when it runs: a refusal must leave no marker. Controls
load the same files with MLflow directly and see the payload run, so each refusal is
of something that would have run.

MLflow's own pickle switch (``MLFLOW_ALLOW_PICKLE_DESERIALIZATION``) is turned on for
these tests, as it is on Databricks runtimes: the allow-list must hold without it.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import zipfile

import pytest
import torch

from driftgate import registry
from driftgate.config import load_config
from driftgate.jobs import train as train_job
from driftgate.training.train import TrainParams
from tests import hostile_models as hostile
from tests.conftest import mlflow_client, seed_mlflow_store
from tests.driftgate.lenient_gates import LENIENT_GATES

MODEL = "guarded"


@pytest.fixture(autouse=True)
def _mlflow_would_unpickle(monkeypatch):
    monkeypatch.setenv("MLFLOW_ALLOW_PICKLE_DESERIALIZATION", "true")


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """One genuine version (v1) of MODEL in this module's own store."""
    root = tmp_path_factory.mktemp("guarded")
    (root / "driftgate.yaml").write_text(f"home: state\nmodel:\n  name: {MODEL}\n")
    seed_mlflow_store(root / "state" / "mlflow.db")  # the store `home: state` opens
    (root / "gates.yaml").write_text(LENIENT_GATES)
    config = load_config(root / "driftgate.yaml")
    config.train = TrainParams(max_epochs=2, patience=2)
    data = train_job.prepare_data(config)
    result = train_job.fit_model(config, data, on_epoch=None)
    metrics = train_job.evaluate_model(config, data, result)
    genuine = train_job.register_model(config, data, result, metrics).registered
    variants = hostile.Variants.of(
        config.tracking, MODEL, genuine.version, MODEL, tmp_path_factory.mktemp("variants")
    )
    return {"root": root, "config": config, "genuine": genuine, "variants": variants}


@pytest.fixture
def marker(tmp_path):
    return tmp_path / "payload-ran"


def refused(store, version: str) -> registry.RegistryError:
    with pytest.raises(registry.RegistryError) as caught:
        registry.load_pyfunc(store["config"].tracking, f"models:/{MODEL}/{version}")
    assert f"models:/{MODEL}/{version}" in str(caught.value)
    return caught.value


def control_runs_payload(store, version: str, marker) -> None:
    """MLflow itself, given the same files, runs the payload."""
    import mlflow

    with contextlib.suppress(Exception):
        mlflow.pyfunc.load_model(str(store["variants"].folders[version]))
    assert marker.read_text() == "payload ran", "the hostile variant is not hostile"


# -- what passes ---------------------------------------------------------------------------


def test_the_genuine_model_passes_and_loads(store):
    """Control: the allow-list accepts exactly what training writes."""
    from driftgate import modelguard

    variants = store["variants"]
    assert modelguard.inspect_model_folder(variants.pristine) == []
    genuine = store["genuine"]
    model = registry.load_pyfunc(store["config"].tracking, genuine.model_uri)
    assert model.predict(torch.zeros((2, 8)).numpy()).shape == (2,)
    architecture, state = registry.load_weights(store["config"].tracking, genuine.run_id)
    assert architecture["builtin"]["n_features"] == 8 and state


# -- (a) the reported attack ---------------------------------------------------------------


def test_a_cloudpickled_pyfunc_beside_a_real_pt2_is_refused(store, marker):
    version = store["variants"].register(hostile.cloudpickled_pyfunc(marker))
    error = refused(store, version)
    assert not marker.exists(), "the payload ran"
    assert "a pickled model" in str(error)
    reasons = {f.file: [] for f in getattr(error, "findings", ())}
    for finding in getattr(error, "findings", ()):
        reasons[finding.file].append(finding.reason)
    assert any("loader_module: 'mlflow.pyfunc.model'" in r for r in reasons["MLmodel"])
    assert any("python_model: not an allowed key" in r for r in reasons["MLmodel"])
    assert reasons["python_model.pkl"] == ["a pickle stream (protocol 5)"]
    control_runs_payload(store, version, marker)


# -- (b) another loader module -------------------------------------------------------------


@pytest.mark.parametrize(
    "shape, loader",
    [(hostile.model_from_code, "mlflow.pyfunc.model"), (hostile.sklearn_loader, "mlflow.sklearn")],
    ids=["models-from-code", "sklearn"],
)
def test_a_loader_module_other_than_mlflow_pytorch_is_refused(store, marker, shape, loader):
    version = store["variants"].register(shape(marker))
    error = refused(store, version)
    assert not marker.exists(), "the payload ran"
    assert f"python_function.loader_module: '{loader}'; only 'mlflow.pytorch' may load" in str(
        error
    )
    control_runs_payload(store, version, marker)


def test_a_data_path_outside_the_checked_folder_is_refused(store):
    """``data`` is joined to the folder by the loader: ``../`` would load unchecked files."""

    def escape(folder):
        hostile.edit_mlmodel(
            folder, lambda meta: meta["flavors"]["python_function"].update(data="../elsewhere")
        )

    error = refused(store, store["variants"].register(escape))
    assert "python_function.data: '../elsewhere'; only 'data' may load" in str(error)


# -- (c) an extra flavour --------------------------------------------------------------------


def test_an_extra_unknown_flavour_is_refused(store):
    def extra(folder):
        hostile.edit_mlmodel(
            folder,
            lambda meta: meta["flavors"].update(
                sklearn={"pickled_model": "model.pkl", "serialization_format": "cloudpickle"}
            ),
        )

    error = refused(store, store["variants"].register(extra))
    assert [str(f) for f in getattr(error, "findings", ())] == [
        "MLmodel: flavour 'sklearn' is not allowed (only python_function, pytorch)"
    ]


# -- (d) a pickle under another name ---------------------------------------------------------


@pytest.mark.parametrize(
    "name, protocol",
    [(hostile.PT2, 5), ("input_example.json", 4), ("data/model", 2), ("data/state", 0)],
    ids=["as-model.pt2", "as-json", "no-extension", "protocol-0"],
)
def test_a_pickle_under_any_name_is_refused_by_its_bytes(store, marker, name, protocol):
    def plant(folder):
        (folder / name).write_bytes(hostile.payload_pickle(marker, protocol))

    error = refused(store, store["variants"].register(plant))
    assert not marker.exists(), "the payload ran"
    (finding,) = [f for f in getattr(error, "findings", ()) if f.file == name]
    assert finding.pickled and finding.reason.startswith("a pickle stream"), finding
    assert "refusing to load a pickled model" in str(error)


# -- (e) a zip holding a pickle ----------------------------------------------------------------


@pytest.mark.parametrize("name", [hostile.PT2, "data/extra.bin"], ids=["as-model.pt2", "extra"])
def test_a_zip_holding_data_pkl_is_refused(store, marker, name):
    def plant(folder):
        archive = hostile.zip_bytes({"model/data.pkl": hostile.payload_pickle(marker, 2)})
        (folder / name).write_bytes(archive)

    error = refused(store, store["variants"].register(plant))
    assert not marker.exists(), "the payload ran"
    (finding,) = [f for f in getattr(error, "findings", ()) if f.file.startswith(name)]
    assert finding.pickled and "data.pkl" in str(finding), finding


def test_a_pt2_whose_weights_are_pickled_is_refused(store, marker):
    """torch.export.load unpickles a weight its config marks ``use_pickle: true``
    (``torch.load(weights_only=False)``)."""
    config_name = "model/data/weights/model_weights_config.json"

    def pickled_weight(members):
        config = json.loads(members[config_name])
        first = next(iter(config["config"].values()))
        first["use_pickle"] = True
        members[config_name] = json.dumps(config).encode()
        members[f"model/data/weights/{first['path_name']}"] = hostile.torch_save_payload(marker)

    version = store["variants"].register(lambda folder: hostile.edit_pt2(folder, pickled_weight))
    error = refused(store, version)
    assert not marker.exists(), "the payload ran"
    assert "use_pickle is True (weight_0)" in str(error)
    control_runs_payload(store, version, marker)


def test_a_pt2_whose_sample_inputs_name_other_globals_is_refused(store, marker):
    """torch falls back to ``torch.load(weights_only=False)`` for sample inputs that the
    restricted unpickler refuses."""

    def hostile_inputs(members):
        members["model/data/sample_inputs/model.pt"] = hostile.torch_save_payload(marker)

    version = store["variants"].register(lambda folder: hostile.edit_pt2(folder, hostile_inputs))
    error = refused(store, version)
    assert not marker.exists(), "the payload ran"
    assert "sample_inputs/model.pt!data.pkl: a pickle naming __builtin__.exec" in str(error)
    control_runs_payload(store, version, marker)


def test_an_unknown_member_of_the_pt2_archive_is_refused(store):
    def extra(members):
        members["model/extra/notes.txt"] = b"hello"

    error = refused(
        store, store["variants"].register(lambda folder: hostile.edit_pt2(folder, extra))
    )
    assert [str(f) for f in getattr(error, "findings", ())] == [
        "data/model.pt2!extra/notes.txt: not a member of torch.export's pt2 archive"
    ]


# -- state dicts ---------------------------------------------------------------------------


def test_a_hostile_state_dict_never_reaches_torch_load(store, marker, tmp_path):
    weights = tmp_path / "weights"
    weights.mkdir()
    (weights / "architecture.json").write_text(json.dumps({"n_features": 8}))
    (weights / "state_dict.pt").write_bytes(hostile.torch_save_payload(marker))
    version = store["variants"].register(weights=weights)
    run_id = mlflow_client(store["config"].tracking.uri).get_model_version(MODEL, version).run_id
    with pytest.raises(
        registry.RegistryError, match=r"state_dict\.pt!data\.pkl: a pickle naming __builtin__\.exec"
    ):
        registry.load_weights(store["config"].tracking, run_id)
    assert not marker.exists()


def test_the_genuine_torch_save_state_dict_passes(store, tmp_path):
    """Control: the allow-list accepts a state dict as torch.save writes it to a file."""
    from driftgate import modelguard
    from driftgate.training.model import TabularClassifier

    weights = tmp_path / "weights"
    weights.mkdir()
    torch.save(TabularClassifier(8).state_dict(), weights / "state_dict.pt")
    (weights / "architecture.json").write_text("{}")
    assert modelguard.inspect_weights_folder(weights) == []
    with zipfile.ZipFile(weights / "state_dict.pt") as archive:
        assert "state_dict/data.pkl" in archive.namelist()


# -- through the gate --------------------------------------------------------------------------


def test_promote_refuses_a_hostile_candidate_naming_the_reason(store, marker):
    """``driftgate promote --candidate N`` (the CLI, a real subprocess) on the reported
    attack with every registration tag copied: non-zero, the reason, no payload run,
    no alias moved."""
    variants = store["variants"]
    version = variants.register(hostile.cloudpickled_pyfunc(marker))
    command = [sys.executable, "-m", "driftgate.cli", "promote", "--candidate", version]
    command += ["--gates", str(store["root"] / "gates.yaml")]
    command += ["--config", str(store["root"] / "driftgate.yaml")]
    done = subprocess.run(
        command,
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "NO_COLOR": "1"},
    )
    assert done.returncode == registry.RegistryError.exit_code, done.stdout + done.stderr
    assert f"models:/{MODEL}/{version}: refusing to load a pickled model" in done.stderr
    assert "python_model.pkl: a pickle stream" in done.stderr
    assert not marker.exists(), "the payload ran in the gate"
    client = mlflow_client(store["config"].tracking.uri)
    assert registry.CHAMPION_ALIAS not in client.get_registered_model(MODEL).aliases


def test_evaluate_refuses_a_hostile_version(store, marker):
    from driftgate.jobs.evaluate import evaluate_candidate

    version = store["variants"].register(hostile.cloudpickled_pyfunc(marker))
    with pytest.raises(registry.RegistryError, match="python_model"):
        evaluate_candidate(store["config"], f"models:/{MODEL}/{version}")
    assert not marker.exists()


def test_a_pickle_hiding_its_import_behind_the_memo_is_refused(tmp_path):
    """STACK_GLOBAL takes the top two stack items, which BINGET can push from the memo:
    string literals seen before are not necessarily its operands."""
    import os
    import pickle

    from driftgate import modelguard

    def text(value: str) -> bytes:  # SHORT_BINUNICODE
        return b"\x8c" + bytes([len(value)]) + value.encode()

    memo = text("os") + b"\x94" + text("system") + b"\x94"  # MEMOIZE: memo 0, 1
    decoy = text("torch") + text("FloatStorage")  # literals an allow-list would accept
    data = b"\x80\x04" + memo + decoy + b"h\x00h\x01\x93."  # BINGET 0, 1; STACK_GLOBAL
    assert pickle.loads(data) is os.system  # control: it imports os.system

    weights = tmp_path / "weights"
    weights.mkdir()
    (weights / "architecture.json").write_text("{}")
    (weights / "state_dict.pt").write_bytes(hostile.zip_bytes({"archive/data.pkl": data}))
    (finding,) = modelguard.inspect_weights_folder(weights)
    assert finding.pickled and finding.file == "state_dict.pt!data.pkl", finding


# -- code inside the pt2 graph (issue 28, 1) ---------------------------------------------------


def control_runs_payload_on_predict(store, version: str, marker) -> None:
    """MLflow, given the same files, runs the payload at load or on the first call."""
    import mlflow

    with contextlib.suppress(Exception):
        model = mlflow.pyfunc.load_model(str(store["variants"].folders[version]))
        model.predict(torch.zeros((2, 8)).numpy())
    assert marker.read_text() == "payload ran", "the hostile variant is not hostile"


@pytest.mark.parametrize(
    "shape, reason",
    [
        (hostile.guards_code_payload, "$.guards_code: guards are code torch executes"),
        (hostile.expr_str_payload, "as_expr.expr_str: character '+' at"),
    ],
    ids=["guards_code", "expr_str"],
)
def test_code_in_the_pt2_graph_is_refused_before_torch_reads_it(store, marker, shape, reason):
    """Failed before: both variants passed the allow-list (the graph was only checked for
    being JSON) and the payload ran at load (expr_str) or on every call (guards_code)."""
    version = store["variants"].register(shape(marker))
    error = refused(store, version)
    assert not marker.exists(), "the payload ran"
    assert "data/model.pt2!models/model.json: $." in str(error) and reason in str(error)
    control_runs_payload_on_predict(store, version, marker)


@pytest.mark.parametrize(
    "target", ["torch.os.system", "builtins.exec", "#custom:ns.op", "torch.ops.higher_order.foo"]
)
def test_a_node_calling_anything_but_an_operator_is_refused(store, target):
    """torch resolves a node's target by getattr from ``torch`` (``torch.os.system`` is
    ``os.system``); its verifier refuses non-operators today, the allow-list does so
    before torch is asked."""
    error = refused(store, store["variants"].register(hostile.node_target(target)))
    assert "graph.nodes[0].target: not an aten/prims operator or an allowed builtin" in str(error)
    assert repr(target)[:40] in str(error)
