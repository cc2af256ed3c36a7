"""The model formats of the allow-list (driftgate.modelguard.formats) as a closed list.

Each format is judged on what MLflow itself writes: a pt2 model saved with
``mlflow.pytorch.save_model`` and an ONNX model with ``mlflow.onnx.save_model``, then
edited. A format is a security decision, so the list must stay closed (nothing
outside the package registers one) and no format may admit another's flavours.
"""

from __future__ import annotations

import importlib.util
import pkgutil
import re
import shutil
import sys

import numpy as np
import pytest
import yaml

from driftgate import modelguard
from driftgate.modelguard import formats
from driftgate.modelguard.formats import registry
from tests import hostile_models as hostile


@pytest.fixture(scope="module")
def genuine(tmp_path_factory):
    """A folder per registered format, as MLflow writes it: format name -> folder."""
    import mlflow
    import torch
    from onnx import TensorProto, helper

    root = tmp_path_factory.mktemp("formats")

    class Probability(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.linear = torch.nn.Linear(4, 1)

        def forward(self, x):
            return torch.sigmoid(self.linear(x)).squeeze(-1)

    example = np.zeros((3, 4), np.float32)
    mlflow.pytorch.save_model(
        Probability(), str(root / "pt2"), serialization_format="pt2", input_example=example
    )
    weights = helper.make_tensor("w", TensorProto.FLOAT, [4, 1], [0.5] * 4)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["p"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, 4])],
        [helper.make_tensor_value_info("p", TensorProto.FLOAT, [None, 1])], [weights],
    )  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)])
    mlflow.onnx.save_model(model, str(root / "onnx"))
    folders = {"pt2": root / "pt2", "onnx": root / "onnx"}
    # Every registered format has a genuine folder here: a new format needs one too.
    assert sorted(folders) == sorted(f.name for f in formats.formats())
    return folders


def copy_of(folder, tmp_path, name="copy"):
    target = tmp_path / name
    shutil.copytree(folder, target)
    return target


def flavours_of(folder) -> dict:
    return yaml.safe_load((folder / "MLmodel").read_text())["flavors"]


def set_flavour(folder, flavour: str, conf: dict) -> None:
    meta = yaml.safe_load((folder / "MLmodel").read_text())
    meta["flavors"][flavour] = conf
    (folder / "MLmodel").write_text(yaml.safe_dump(meta))


def test_the_closed_list_is_pt2_and_onnx_and_each_genuine_folder_passes(genuine):
    """Control for the tests below: each format claims and admits its own folder."""
    assert [f.name for f in formats.formats()] == ["onnx", "pt2"]
    for name, folder in genuine.items():
        assert modelguard.inspect_model_folder(folder) == []
        assert modelguard.model_format(folder) == name
        assert modelguard.format_of(folder) is formats.format_named(name)
    assert modelguard.format_of(genuine["onnx"]).outputs_by_name
    assert not modelguard.format_of(genuine["pt2"]).outputs_by_name
    assert [f.runs_on_torch for f in formats.formats()] == [False, True]


def test_register_refuses_a_caller_outside_the_formats_package(tmp_path):
    """A plugin (any module outside driftgate/modelguard/formats/) cannot add a format,
    even a copy of a registered one under a new name and flavour."""

    class Pickled(type(formats.format_named("pt2"))):
        name = "pickled"
        marker = "sklearn"

    before = formats.formats()
    with pytest.raises(PermissionError, match=r"tests\.driftgate\.test_model_formats may not"):
        formats.register(Pickled())

    # A module file elsewhere, imported as a plugin would be (gates.yaml plugins:).
    plugin = tmp_path / "format_plugin.py"
    plugin.write_text(
        "from driftgate.modelguard.formats import register\n"
        "from driftgate.modelguard.formats.pt2 import Pt2Format\n"
        "class Sklearn(Pt2Format):\n"
        "    name = 'sklearn'\n"
        "    marker = 'sklearn'\n"
        "register(Sklearn())\n"
    )
    # Named like the package but not inside it: the check is on the module, not a prefix.
    for module_name in ("format_plugin", "driftgate.modelguard.formats_plugin"):
        spec = importlib.util.spec_from_file_location(module_name, plugin)
        module = importlib.util.module_from_spec(spec)
        with pytest.raises(PermissionError, match="closed list"):
            spec.loader.exec_module(module)
        sys.modules.pop(module_name, None)
    assert formats.formats() == before
    assert formats.format_claiming({"sklearn": {}, "python_function": {}}) is None


def register_as_a_module_of_the_package(code: str) -> None:
    """Run ``code`` as a module of driftgate/modelguard/formats/ would run (its
    ``__name__`` inside the package), so register's caller check lets it through and
    what is tested is the check after it."""
    exec(code, {"__name__": "driftgate.modelguard.formats.planted"})


PT2_COPY = (
    "from driftgate.modelguard.formats.pt2 import Pt2Format\n"
    "from driftgate.modelguard.formats.registry import register\n"
    "class Copy(Pt2Format):\n"
    "    name = 'copy'\n"
    "    marker = 'copy'\n"
    "    judges_unclaimed = False\n"
)


@pytest.mark.parametrize(
    ("claim_order", "refusal"),
    [
        ("20", "model formats 'pt2' and 'copy' have the same claim_order 20"),
        ("10", "model formats 'onnx' and 'copy' have the same claim_order 10"),
        ("None", "model format 'copy': claim_order must be an int"),
        ("'5'", "model format 'copy': claim_order must be an int"),
    ],
)
def test_a_format_without_its_own_claim_order_is_refused(claim_order, refusal):
    """The order formats claim a folder is each one's claim_order, never import order:
    a tie (which of two would claim a folder naming both?) or no order is refused at
    registration, naming the formats, and nothing is registered."""
    before = formats.formats()
    with pytest.raises(ValueError, match=re.escape(refusal)):
        register_as_a_module_of_the_package(
            PT2_COPY + f"    claim_order = {claim_order}\nregister(Copy())\n"
        )
    assert formats.formats() == before


def test_formats_are_asked_in_claim_order_whatever_order_they_register_in():
    """A format registered last with the lowest claim_order is asked first (control: the
    same module registers, so the refusals above come from the claim_order alone)."""
    before = formats.formats()
    try:
        register_as_a_module_of_the_package(PT2_COPY + "    claim_order = 5\nregister(Copy())\n")
        assert [f.name for f in formats.formats()] == ["copy", "onnx", "pt2"]
        assert formats.format_claiming({"copy": {}, "onnx": {}}).name == "copy"
    finally:
        registry._FORMATS.pop("copy", None)  # the process's list as it was, for other tests
    assert formats.formats() == before


def test_every_refusal_advises_how_to_log_each_format_there_is():
    """The advice after a refusal is read from the formats: pt2's (the default) first,
    then by claim order, so a new format is named there with no other file edited; one
    that says nothing of how to log it is named by its description and flavour."""
    advice = registry.how_to_log_loadable()
    assert advice == (
        "driftgate loads nothing that unpickles: log a PyTorch model with "
        "mlflow.pytorch.log_model (pt2, the default), any other model as ONNX with "
        "mlflow.onnx.log_model (e.g. skl2onnx for scikit-learn)"
    )
    try:
        register_as_a_module_of_the_package(
            PT2_COPY
            + "    description = 'a copied pt2 model'\n"
            + "    how_to_log = ''\n"
            + "    claim_order = 30\n"
            + "register(Copy())\n"
        )
        assert registry.how_to_log_loadable() == (
            f"{advice}, a copied pt2 model (MLmodel flavour 'copy')"
        )
    finally:
        registry._FORMATS.pop("copy", None)  # the process's list as it was, for other tests
    assert registry.how_to_log_loadable() == advice


def test_the_package_imports_every_module_of_its_own_folder():
    """Discovered, not listed: each module of the package's folder (but the registry) is
    imported and registers its format, so a new format needs no line anywhere else."""
    modules = {m.name for m in pkgutil.iter_modules(formats.__path__) if m.name != "registry"}
    assert modules == {"onnx", "pt2"}
    assert {sys.modules[f"{formats.__name__}.{m}"] for m in modules} == {
        sys.modules[type(f).__module__] for f in formats.formats()
    }


def test_each_format_refuses_every_other_formats_flavours(genuine, tmp_path):
    """Naming another format's flavours beside a format's own never widens what loads:
    each format's rules refuse the other's marker flavour and its loader, whichever
    format claims the folder."""
    for own in formats.formats():
        for other in formats.formats():
            if other is own:
                continue
            assert other.marker not in own.flavour_checks()
            theirs = flavours_of(genuine[other.name])

            folder = copy_of(genuine[own.name], tmp_path, f"{own.name}-with-{other.name}")
            set_flavour(folder, other.marker, theirs[other.marker])
            assert modelguard.format_of(folder) in (own, other)  # both markers: either
            assert modelguard.inspect_model_folder(folder), "two formats' flavours passed"
            assert (
                f"MLmodel: flavour '{other.marker}' is not allowed (only {', '.join(own.flavours)})"
            ) in [str(f) for f in own.mlmodel_findings("MLmodel", folder / "MLmodel")]

            folder = copy_of(genuine[own.name], tmp_path, f"{own.name}-loader-{other.name}")
            set_flavour(folder, "python_function", theirs["python_function"])
            assert modelguard.format_of(folder) is own
            assert (
                f"MLmodel: python_function.loader_module: {other.loader_module!r}; "
                f"only {own.loader_module!r} may load"
            ) in [str(f) for f in modelguard.inspect_model_folder(folder)]


def test_a_folder_no_format_claims_is_refused_naming_the_known_formats(genuine, tmp_path, marker):
    """The pt2 folder with its ``pytorch`` flavour taken out and a cloudpickled pyfunc in:
    no format claims it, so it is refused naming the formats; the rules that judge
    unclaimed folders (pt2's, as before) still say what it lacks and name the pickle."""
    folder = copy_of(genuine["pt2"], tmp_path)
    hostile.cloudpickled_pyfunc(marker)(folder)
    hostile.edit_mlmodel(folder, lambda meta: meta["flavors"].pop("pytorch"))
    assert modelguard.format_of(folder) is None and modelguard.model_format(folder) is None
    findings = modelguard.inspect_model_folder(folder)
    reasons = [str(f) for f in findings]
    assert reasons[0] == (
        "MLmodel: flavours python_function: not a model format driftgate loads (known: "
        "onnx (flavour 'onnx'), pt2 (flavour 'pytorch'))"
    )
    assert "MLmodel: flavour 'pytorch' is missing" in reasons
    assert "python_model.pkl: a pickle stream (protocol 5)" in reasons
    assert modelguard.describe(findings).startswith("python_model.pkl: a pickle stream")
    assert not marker.exists()


@pytest.fixture
def marker(tmp_path):
    return tmp_path / "payload-ran"
