"""Fuzz of the pt2 graph grammar (driftgate.modelguard.pt2_graph) against torch itself.

A small module is exported with a dynamic batch (the shape MLflow logs); hypothesis
then rewrites one field torch evaluates or executes (a symbolic size's ``expr_str``,
``guards_code``, a node's ``target``, the input spec) with strings assembled from
genuine srepr fragments and payload fragments that write a marker file. The property:
whatever the allow-list admits, torch loads and calls without the marker appearing.
Admitted cases are real loads (torch.export.load, .module(), a forward call), so a
grammar that let code through would fail here, not in production.
"""

from __future__ import annotations

import contextlib
import copy
import json
import zipfile

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from driftgate.modelguard import pt2_graph
from driftgate.modelguard.formats import pt2

SYMBOL = "Symbol('s77', positive=True, integer=True)"


class _Small(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(4, 2)

    def forward(self, x):
        return torch.sigmoid(self.linear(x))


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    folder = tmp_path_factory.mktemp("pt2-fuzz")
    program = torch.export.export(
        _Small(),
        (torch.zeros(3, 4),),
        dynamic_shapes=({0: torch.export.Dim("batch", min=1)},),
    )
    path = folder / "model.pt2"
    torch.export.save(program, path)
    with zipfile.ZipFile(path) as archive:
        members = {name: archive.read(name) for name in archive.namelist()}
    (graph_name,) = [name for name in members if name.endswith("models/model.json")]
    return {"folder": folder, "members": members, "graph_name": graph_name}


def _payload(marker) -> str:
    return f"__import__('pathlib').Path({str(marker)!r}).write_text('payload ran')"


def _fragments(marker) -> list[str]:
    """Pieces an expression is assembled from: genuine srepr and hostile Python."""
    return [
        SYMBOL, "Integer(3)", "Integer(-1)", "Mul(Integer(2), ", "Add(", "Max(", ")", ", ",
        "FloorDiv(", "Float('0.5', precision=53)", "true", "+", "*", ".", "__class__",
        _payload(marker), f"len({_payload(marker)})", "exec(", "eval(", "lambda: ",
        "getattr(", "Symbol(", "'s0'", "__import__", "os", "[0]", "(", "Pow(", "**",
        "Integer(12345678901234567890123)", "\\", '"', "#", "\n",
    ]  # fmt: skip


def _set_first_symbolic_size(graph: dict, text: str) -> None:
    for tensor in graph["graph_module"]["graph"]["tensor_values"].values():
        for size in tensor["sizes"]:
            if "as_expr" in size:
                size["as_expr"]["expr_str"] = text
                return
    raise AssertionError("no symbolic size in the exported graph")


def _edits(marker):
    fragments = st.lists(st.sampled_from(_fragments(marker)), min_size=1, max_size=6).map("".join)
    targets = st.sampled_from(
        [
            "torch.ops.aten.linear.default", "torch.ops.aten.relu.default", "_operator.add",
            "torch.os.system", "builtins.exec", "torch._C._get_tracing_state", "#x:y",
            "torch.ops.higher_order.cond", "math.sqrt", "torch.ops.aten.__class__.x",
        ]
    )  # fmt: skip
    return st.one_of(
        fragments.map(lambda text: ("expr_str", text)),
        fragments.map(lambda text: ("guards_code", [text])),
        targets.map(lambda target: ("target", target)),
        st.sampled_from(["builtins.tuple", "builtins.list", "collections.namedtuple", "os.x"]).map(
            lambda kind: ("in_spec", kind)
        ),
    )


def _apply(graph: dict, edit: tuple) -> dict:
    graph = copy.deepcopy(graph)
    field, value = edit
    module = graph["graph_module"]
    if field == "expr_str":
        _set_first_symbolic_size(graph, value)
    elif field == "guards_code":
        graph["guards_code"] = value
    elif field == "target":
        module["graph"]["nodes"][0]["target"] = value
    else:
        (entry,) = [e for e in module["module_call_graph"] if e["fqn"] == ""]
        spec = json.loads(entry["signature"]["in_spec"])
        spec[1]["type"] = value
        entry["signature"]["in_spec"] = json.dumps(spec)
    return graph


def _load_and_call(path) -> None:
    with contextlib.suppress(Exception):
        module = torch.export.load(path).module()
        module(torch.zeros(2, 4))


def test_the_genuine_export_is_admitted(exported):
    graph = json.loads(exported["members"][exported["graph_name"]])
    assert pt2_graph.graph_findings(graph) == []


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data())
def test_nothing_the_grammar_admits_runs_code(exported, tmp_path, data):
    marker = tmp_path / "payload-ran"
    marker.unlink(missing_ok=True)
    genuine = json.loads(exported["members"][exported["graph_name"]])
    graph = _apply(genuine, data.draw(_edits(marker)))
    members = {**exported["members"], exported["graph_name"]: json.dumps(graph).encode()}
    path = tmp_path / "fuzzed.pt2"
    with zipfile.ZipFile(path, "w") as archive:
        for name, content in members.items():
            archive.writestr(name, content)
    with zipfile.ZipFile(path) as archive:
        findings = pt2.inspect_pt2_members("data/model.pt2", archive)
    if findings:
        return  # refused before torch saw it
    _load_and_call(path)
    assert not marker.exists(), f"admitted and the payload ran: {graph}"


@pytest.mark.parametrize(
    "text",
    [
        "Symbol('s77', positive=True, integer=True)",
        "Mul(Integer(8), Symbol('s77', positive=True, integer=True))",
        "FloorDiv(Add(Symbol('s0', positive=True, integer=True), Integer(-1)), Integer(2))",
        "StrictLessThan(Integer(1), Symbol('u0', integer=True))",
        "Float('0.5', precision=53)",
    ],
)
def test_expressions_torch_writes_are_admitted(text):
    assert pt2_graph.expression_reason(text) is None


@pytest.mark.parametrize(
    "text, reason",
    [
        ("Symbol('s0').__class__", "character '.'"),
        ("__import__('os')", "name '__import__'"),
        ("Symbol('s0')+1", "character '+'"),
        ("Pow(Integer(2), Integer(100000))", "name 'Pow'"),
        ("(Integer(1))", "a parenthesis that does not call a function"),
        ("Integer(" + "9" * 40 + ")", "an integer of 40 digits"),
        ("Max(" * 40 + "Integer(1)" + ")" * 40, "nested deeper than 32"),
        ("Symbol('s0\\x27)", "character"),
        ("Symbol", "'Symbol' is not called"),
        ("Integer(1", "unbalanced"),
        # Found in review: text and keywords sympy would parse again or spend minutes on.
        ("Rational('1e100000000')", "text \"'1e100000000'\" in Rational"),
        ("Float('1.0', dps=100000000)", "keyword dps=100000000"),
        ("Float('1.0', precision=100000000)", "keyword precision=100000000"),
        ("Max(exec==Integer(1), 1)", "keyword exec="),
        ("Abs('x.y')", "text \"'x.y'\" in Abs"),
        ("Max('Symbol.mro', 1)", "in Max"),
        ("Symbol('S.y')", "in Symbol"),
    ],
)
def test_expressions_outside_the_grammar_are_refused_naming_why(text, reason):
    assert reason in pt2_graph.expression_reason(text)


@pytest.mark.parametrize(
    "target, reason",
    [
        # Found in review: a functional aten op that reads any file into a tensor (and,
        # with an in-place op in a graph that declares the training dialect, writes it).
        ("torch.ops.aten.from_file.default", "an operator taking text (filename)"),
        ("torch.ops.aten.fill_.Scalar", "an operator that writes to its arguments"),
        ("torch.ops.aten.copy_.default", "an operator that writes to its arguments"),
        ("torch.ops.aten._print.default", "an operator taking text"),
        ("torch.ops.aten.no_such_op.default", "not an operator torch has"),
        ("torch.ops.aten.__class__.x", "not an operator torch has"),
        ("torch.ops.aten.__class__.__subclasses__", "not an operator torch has"),
        ("torch.ops.aten.__iand__.Tensor", "an operator that writes to its arguments"),
    ],
)
def test_operators_that_could_touch_files_or_state_are_refused(target, reason):
    assert reason in pt2_graph.target_reason(target)


@pytest.mark.parametrize(
    "target",
    ["torch.ops.aten.linear.default", "torch.ops.aten.gelu.default", "torch.ops.aten.sub.Tensor",
     "torch.ops.aten.sym_size.int", "_operator.getitem",
     # what `a & b` exports to (the churn example's factory model): aten has dunder ops
     "torch.ops.aten.__and__.Tensor"],
)  # fmt: skip
def test_ordinary_operators_are_admitted(target):
    assert pt2_graph.target_reason(target) is None
