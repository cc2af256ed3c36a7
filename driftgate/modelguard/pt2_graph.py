"""The closed grammar of torch.export's graph JSON (``models/<name>.json`` in a pt2).

torch does more with that JSON than read data from it (torch 2.13,
``torch/_export/serde/serialize.py`` and ``torch/export/_unlift.py``):

- every ``expr_str`` (a symbolic size, stride, offset or argument) goes through
  ``sympy.sympify``, which *evaluates* the string as Python; ``__import__('os')...``
  inside one runs when the archive is loaded (``torch.export.load``: serve, promote,
  adopt);
- ``guards_code`` is pasted into the source of a function that ``.module()`` compiles
  and executes on every call of the model (every ``/predict``);
- a node's ``target`` (and an ``as_operator`` argument) is resolved by ``getattr`` from
  ``torch``, ``math`` or ``operator`` and becomes the function the node calls; a name
  starting with ``#`` goes to an extension registry;
- a ``custom_obj`` argument or input names a TorchScript class whose object is rebuilt
  from a pickled constant.

A string that torch evaluates or executes is therefore admitted only if it is absent
or matches a grammar this module closes:

- ``expr_str``: the ``sympy.srepr`` form torch writes (``Symbol('s77', positive=True,
  integer=True)``, ``Mul(Integer(8), Symbol(...))``): calls of the functions in
  :data:`SYMPY_FUNCTIONS` only, with string literals of plain characters, integers of
  at most 19 digits, keyword flags, commas and parentheses nested at most 32 deep. No
  attribute access, no other name, no operator: nothing else reaches ``eval``. Powers
  are left out (``Pow(Integer(2), Integer(10**18))`` would hang the loader).
- ``guards_code``: empty. torch writes guards only for shapes specialised at export,
  which a model logged with a dynamic batch has none of.
- ``target`` / ``as_operator``: ``torch.ops.aten.<op>.<overload>`` or
  ``torch.ops.prims.<op>.<overload>``, or one of the arithmetic and comparison builtins
  torch's verifier admits on symbolic sizes (:data:`BUILTIN_TARGETS`).
- ``custom_obj`` / ``as_custom_obj``: refused (no pickled objects at all).
- ``in_spec`` / ``out_spec`` (pytree specs): tuples, lists, dicts and leaves only.

Anything unknown fails closed, naming the JSON path of the field.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterator

# The sympy constructors torch's srepr of a symbolic shape uses, and torch's own
# integer functions (``torch/utils/_sympy/functions.py``, as the deserialiser names
# them). Each builds an expression; none reads a file or imports.
SYMPY_FUNCTIONS = frozenset(
    {
        "Symbol", "Integer", "Rational", "Float", "Add", "Mul", "Max", "Min", "Abs",
        "Eq", "Ne", "Lt", "Le", "Gt", "Ge", "Equality", "Unequality", "StrictLessThan",
        "StrictGreaterThan", "LessThan", "GreaterThan", "And", "Or", "Not", "Piecewise",
        "ExprCondPair", "FloorDiv", "ModularIndexing", "Where", "PythonMod", "Mod",
        "CleanDiv", "CeilToInt", "FloorToInt", "CeilDiv", "IntTrueDiv", "FloatTrueDiv",
        "ToFloat", "TruncToInt", "TruncToFloat", "RoundToInt", "Identity",
    }
)  # fmt: skip
# Constants srepr writes (``true``, ``oo`` ...) and Python's literals.
SYMPY_CONSTANTS = frozenset({"True", "False", "None", "true", "false", "oo", "zoo", "nan"})
# Builtins torch's verifier admits as node targets (arithmetic on symbolic sizes).
BUILTIN_TARGETS = frozenset(
    {f"_operator.{name}" for name in ("getitem", "add", "sub", "mul", "floordiv", "truediv")}
    | {f"_operator.{name}" for name in ("mod", "neg", "eq", "ne", "lt", "le", "gt", "ge")}
    | {f"_operator.{name}" for name in ("and_", "or_", "not_", "pos")}
    | {f"math.{name}" for name in ("ceil", "floor", "trunc", "sqrt")}
    | {f"torch.{name}" for name in ("sym_float", "sym_int", "sym_max", "sym_min", "sym_not")}
    | {"torch.sym_ite", "torch.sym_sqrt"}
)
# The name's form only; _operator_reason then asks torch whether it is an operator (aten
# has dunder operators too: ``__and__.Tensor`` is what ``a & b`` exports to).
OPERATOR_TARGET = re.compile(r"torch\.ops\.(aten|prims)\.[a-z_][a-z0-9_]*\.[A-Za-z_][A-Za-z0-9_]*")
# Pytree node types a spec may name: the containers of a model's inputs and outputs.
TREESPEC_TYPES = frozenset({"builtins.tuple", "builtins.list", "builtins.dict", None})

MAX_EXPRESSION_CHARS = 4096
MAX_EXPRESSION_DEPTH = 32
MAX_INTEGER_DIGITS = 19
MAX_JSON_DEPTH = 256
# The keyword flags srepr writes on a Symbol (its assumptions) and a Float's precision.
SYMBOL_ASSUMPTIONS = frozenset(
    {"positive", "negative", "nonnegative", "nonpositive", "integer", "real", "finite",
     "zero", "nonzero", "commutative", "rational"}
)  # fmt: skip
# A Symbol's name as torch writes it (s77, u0, zuf0...), and a Float's digits.
_SYMBOL_NAME = re.compile(r"'[a-z]{1,8}[0-9]{0,12}'")
_FLOAT_TEXT = re.compile(r"'-?[0-9]{1,30}(\.[0-9]{1,30})?(e[-+]?[0-9]{1,3})?'")
# Operators whose schema takes text (a mode, a message, an equation): each reviewed,
# since text is the only way an operator's arguments could name a file or a path
# (``aten::from_file(str filename, ...)`` reads any file the service can).
TEXT_ARGUMENT_OPERATORS = frozenset(
    {"gelu.default", "div.Tensor_mode", "div.Scalar_mode", "_assert_scalar.default",
     "einsum.default", "pad.default", "searchsorted.Tensor", "searchsorted.Scalar"}
)  # fmt: skip

_TOKEN = re.compile(
    r"""(?P<space>\s+)
      | (?P<name>[A-Za-z_][A-Za-z0-9_]*)
      | (?P<string>'[^'\\]{0,64}')
      | (?P<number>-?[0-9]+)
      | (?P<punct>[(),=])
    """,
    re.VERBOSE,
)


class _Refused(ValueError):
    """Why an expression is outside the grammar."""


def expression_reason(text: object) -> str | None:
    """Why ``text`` is not an srepr of a symbolic shape driftgate admits; None if it is.

    A recursive-descent parse of exactly what torch writes: a call of a function of
    :data:`SYMPY_FUNCTIONS` whose arguments are calls, integers or constants; text only
    as a Symbol's name or a Float's digits (their first argument); keywords only a
    Symbol's assumptions (``True``/``False``) and a Float's ``precision`` (an integer
    of at most three digits). Anything else, ``==`` and a second ``=`` included, is
    refused before sympy's ``eval`` sees it.
    """
    if not isinstance(text, str):
        return "not a string"
    if len(text) > MAX_EXPRESSION_CHARS:
        return f"{len(text)} characters (at most {MAX_EXPRESSION_CHARS})"
    try:
        tokens = _tokens(text)
        position = _expression(tokens, 0, 0)
        if position != len(tokens):
            raise _Refused(f"unexpected {tokens[position][1]!r} after the expression")
    except _Refused as refused:
        return str(refused)
    return None


def _tokens(text: str) -> list[tuple[str, str]]:
    tokens, position = [], 0
    while position < len(text):
        token = _TOKEN.match(text, position)
        if token is None:
            raise _Refused(f"character {text[position]!r} at {position} is outside the grammar")
        position = token.end()
        if token.lastgroup != "space":
            tokens.append((token.lastgroup, token.group()))
    return tokens


def _at(tokens, position) -> tuple[str, str]:
    if position >= len(tokens):
        raise _Refused("the expression ends too early (unbalanced parentheses)")
    return tokens[position]


def _expression(tokens, position: int, depth: int) -> int:
    """Parse one expression at ``position``; the position after it."""
    kind, value = _at(tokens, position)
    if kind == "number":
        if len(value.lstrip("-")) > MAX_INTEGER_DIGITS:
            raise _Refused(
                f"an integer of {len(value.lstrip('-'))} digits (at most {MAX_INTEGER_DIGITS})"
            )
        return position + 1
    if value == "(":
        raise _Refused("a parenthesis that does not call a function")
    if kind != "name":
        raise _Refused(f"{value!r} where an expression belongs")
    if value in SYMPY_CONSTANTS:
        return position + 1
    if value not in SYMPY_FUNCTIONS:
        raise _Refused(f"name {value!r} is not an allowed function or constant")
    if position + 1 >= len(tokens) or tokens[position + 1] != ("punct", "("):
        raise _Refused(f"{value!r} is not called")
    if depth + 1 > MAX_EXPRESSION_DEPTH:
        raise _Refused(f"nested deeper than {MAX_EXPRESSION_DEPTH}")
    return _arguments(value, tokens, position + 2, depth + 1)


def _arguments(function: str, tokens, position: int, depth: int) -> int:
    """The arguments of ``function`` up to its closing parenthesis; the position after."""
    index = 0
    while _at(tokens, position) != ("punct", ")"):
        if index:
            if _at(tokens, position) != ("punct", ","):
                raise _Refused(f"{_at(tokens, position)[1]!r} between arguments of {function}")
            position += 1
        kind, value = _at(tokens, position)
        if kind == "string":
            pattern = {"Symbol": _SYMBOL_NAME, "Float": _FLOAT_TEXT}.get(function)
            if index != 0 or pattern is None or not pattern.fullmatch(value):
                raise _Refused(
                    f"text {value!r} in {function} (only a Symbol's name or a Float's digits)"
                )
            position += 1
        elif (
            kind == "name"
            and position + 1 < len(tokens)
            and tokens[position + 1]
            == (
                "punct",
                "=",
            )
        ):
            position = _keyword(function, value, tokens, position + 2)
        else:
            position = _expression(tokens, position, depth)
        index += 1
    return position + 1


def _keyword(function: str, name: str, tokens, position: int) -> int:
    kind, value = _at(tokens, position)
    if function == "Symbol" and name in SYMBOL_ASSUMPTIONS and value in ("True", "False"):
        return position + 1
    if function == "Float" and name == "precision" and kind == "number" and len(value) <= 3:
        return position + 1
    raise _Refused(f"keyword {name}={value} is outside the grammar of {function}")


def target_reason(target: object) -> str | None:
    """Why ``target`` is not an operator a node may call; None if it is.

    An ``aten``/``prims`` operator torch has, that writes to none of its arguments (a
    graph declares its own dialect, so torch's check that a graph is functional cannot
    be relied on) and takes no text unless reviewed (:data:`TEXT_ARGUMENT_OPERATORS`);
    or an arithmetic builtin on symbolic sizes.
    """
    if not isinstance(target, str):
        return "not a string"
    if target in BUILTIN_TARGETS:
        return None
    if not OPERATOR_TARGET.fullmatch(target):
        return "not an aten/prims operator or an allowed builtin"
    return _operator_reason(target)


@functools.lru_cache(maxsize=1024)
def _operator_reason(target: str) -> str | None:
    import torch
    from torch._ops import OpOverload, OpOverloadPacket

    _, _, namespace, name, overload = target.split(".")
    try:
        packet = getattr(getattr(torch.ops, namespace), name)
        operator = getattr(packet, overload) if isinstance(packet, OpOverloadPacket) else None
    except (AttributeError, RuntimeError):
        operator = None
    # A dunder name that is no operator (``__class__``) resolves to something else: only
    # an OpOverload of an OpOverloadPacket is an operator.
    if not isinstance(operator, OpOverload):
        return "not an operator torch has"
    schema = operator._schema
    if schema.is_mutable:
        return "an operator that writes to its arguments"
    text = [a.name for a in schema.arguments if "str" in str(a.type)]
    if text and f"{name}.{overload}" not in TEXT_ARGUMENT_OPERATORS:
        return f"an operator taking text ({', '.join(text)}), which may name a file"
    return None


def treespec_reason(spec: object) -> str | None:
    """Why a serialised pytree spec names a node type outside :data:`TREESPEC_TYPES`."""
    try:
        _, root = json.loads(spec)  # [protocol, tree]
    except (TypeError, ValueError, RecursionError):
        return "not a serialised pytree spec"
    stack = [root]
    while stack:
        node = stack.pop()
        if not isinstance(node, dict):
            return "not a serialised pytree spec"
        if node.get("type") not in TREESPEC_TYPES:
            return f"node type {node.get('type')!r} (only tuples, lists, dicts and leaves)"
        children = node.get("children_spec", [])
        if not isinstance(children, list):
            return "not a serialised pytree spec"
        stack.extend(children)
    return None


def graph_findings(graph: object) -> list[str]:
    """Every field of a graph JSON torch would evaluate or execute outside the grammar,
    as ``path: reason``; [] when the graph is admitted."""
    reasons = []
    for path, key, value in _fields(graph):
        reason = None
        if key == "expr_str":
            reason = expression_reason(value)
        elif key == "guards_code":
            if value != []:
                reason = "guards are code torch executes on every call; none are admitted"
        elif key in ("target", "as_operator"):
            reason = target_reason(value)
        elif key in ("custom_obj", "as_custom_obj"):
            reason = "a custom object is rebuilt from a pickle; none are admitted"
        elif key in ("in_spec", "out_spec") and value is not None:
            reason = treespec_reason(value)
        elif key == "source_fn_stack":
            reason = _source_fn_reason(value)
        elif key is None:
            reason = value  # the walk's own refusal (too deep)
        if reason:
            shown = repr(value)[:80] if key not in (None, "guards_code") else ""
            reasons.append(f"{path}: {reason}" + (f" ({shown})" if shown else ""))
    return reasons


def _source_fn_reason(value: object) -> str | None:
    """``source_fn_stack`` metadata: ``node,op`` pairs whose op torch resolves by getattr;
    only plain dotted names (no dunder) are admitted."""
    if not isinstance(value, str):
        return "not a string"
    for item in value.split(";"):
        _, _, op = item.partition(",")
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_.]*", op) or "__" in op:
            return f"operator name {op[:40]!r} is outside the grammar"
    return None


def _fields(document: object) -> Iterator[tuple[str, str | None, object]]:
    """``(path, key, value)`` for every member of every object, without recursion."""
    stack: list[tuple[str, object, int]] = [("$", document, 0)]
    while stack:
        path, node, depth = stack.pop()
        if depth > MAX_JSON_DEPTH:
            yield path, None, f"nested deeper than {MAX_JSON_DEPTH}"
            return
        if isinstance(node, dict):
            for key, value in node.items():
                child = f"{path}.{key}"
                yield child, key, value
                stack.append((child, value, depth + 1))
        elif isinstance(node, list):
            stack.extend((f"{path}[{i}]", item, depth + 1) for i, item in enumerate(node))
