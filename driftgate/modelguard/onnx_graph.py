"""What an ONNX ``ModelProto`` may hold: standard operators and plain external tensors.

onnxruntime runs an operator of a non-standard domain (``com.microsoft``, a custom
one) from native code, and reads an external tensor from whatever path its
``location`` names. Both hide in more places than the main graph's nodes and dense
initializers, so every place is walked:

- nodes of the main graph, of every subgraph (``If``/``Loop``/``Scan`` attributes) and
  of every local function's body;
- dense initializers, sparse initializers (their ``values`` and ``indices``), and
  tensor, tensors, sparse-tensor and sparse-tensors attributes, in all of the above.

A node is admitted if its domain is a standard one, or if it calls a local function
the model defines (the exact ``(domain, name)`` pair), whose own body is held to the
same rule. Declaring a function in a domain no longer admits every operator of that
domain: a dummy ``com.microsoft`` function let ``com.microsoft`` operators through.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

# Operator domains onnxruntime implements itself; any other needs a native library.
STANDARD_DOMAINS = frozenset({"", "ai.onnx", "ai.onnx.ml"})
# Domains whose operators onnxruntime itself implements (contrib, layout, training
# kernels): a local function there may be shadowed by the runtime's kernel of the same
# name, so declaring one would not keep a node to the function's checked body.
RUNTIME_DOMAINS = re.compile(
    r"com\.microsoft(\..*)?|com\.ms\..*|ai\.onnx\.(preview\.)?training|ai\.onnx\.contrib|org\.pytorch\..*"
)
# An external tensor's file: a plain name inside the model's folder.
EXTERNAL_FILE = re.compile(r"[A-Za-z0-9_\-][A-Za-z0-9_.\-]{0,200}")


def model_findings(model) -> tuple[list[str], set[str]]:
    """Reasons ``model`` (an ``onnx.ModelProto``) is refused, and the external tensor
    files it names (plain names of the model's folder)."""
    functions = {(function.domain, function.name) for function in model.functions}
    reasons: list[str] = [
        f"function {domain}::{name}: declared in a domain onnxruntime implements natively"
        for domain, name in sorted(functions)
        if RUNTIME_DOMAINS.fullmatch(domain)
    ]
    for where, node in _nodes(model):
        if node.domain in STANDARD_DOMAINS or (node.domain, node.op_type) in functions:
            continue
        reasons.append(
            f"{where}: operator {node.domain}::{node.op_type} is not standard ONNX nor a "
            "function the model defines (custom operators load native code)"
        )
    for domain in sorted({o.domain for o in model.opset_import} - STANDARD_DOMAINS):
        if not any(function_domain == domain for function_domain, _ in functions):
            reasons.append(f"opset import of domain '{domain}' (not standard ONNX)")
    external: set[str] = set()
    for where, tensor in _tensors(model):
        if tensor.data_location != 1:  # TensorProto.EXTERNAL
            continue
        location = {entry.key: entry.value for entry in tensor.external_data}.get("location", "")
        if EXTERNAL_FILE.fullmatch(location) and ".." not in location:
            external.add(location)
        else:
            reasons.append(
                f"{where}: tensor {tensor.name!r}: external data {location!r} is not a plain "
                "file of the model's folder"
            )
    return reasons, external


def _graphs(model) -> Iterator[tuple[str, object]]:
    """``(where, graph or function)`` for the main graph, every subgraph and function."""
    stack: list[tuple[str, object]] = [("graph", model.graph)]
    stack += [(f"function {f.domain}::{f.name}", f) for f in model.functions]
    while stack:
        where, graph = stack.pop()
        yield where, graph
        for node in graph.node:
            for attribute in node.attribute:
                at = f"{where}/{node.name or node.op_type}.{attribute.name}"
                if attribute.HasField("g"):
                    stack.append((at, attribute.g))
                stack += [(f"{at}[{i}]", g) for i, g in enumerate(attribute.graphs)]


def _nodes(model) -> Iterator[tuple[str, object]]:
    for where, graph in _graphs(model):
        for node in graph.node:
            yield where, node


def _tensors(model) -> Iterator[tuple[str, object]]:
    """Every TensorProto of the model, sparse ones' parts included."""
    for where, graph in _graphs(model):
        for tensor in getattr(graph, "initializer", ()):
            yield f"{where} initializer", tensor
        for sparse in getattr(graph, "sparse_initializer", ()):
            yield f"{where} sparse initializer", sparse.values
            yield f"{where} sparse initializer", sparse.indices
        for node in graph.node:
            for attribute in node.attribute:
                at = f"{where}/{node.name or node.op_type}.{attribute.name}"
                if attribute.HasField("t"):
                    yield at, attribute.t
                yield from ((at, tensor) for tensor in attribute.tensors)
                sparse_tensors = list(attribute.sparse_tensors)
                if attribute.HasField("sparse_tensor"):
                    sparse_tensors.append(attribute.sparse_tensor)
                for sparse in sparse_tensors:
                    yield at, sparse.values
                    yield at, sparse.indices
