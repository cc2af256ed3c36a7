"""Hypothesis strategies for fuzzing driftgate's YAML loaders (contracts, gates, config).

``yaml_files(real_text)`` draws the bytes of a file, from three families:

- **mutated documents**: the real file parsed, then 1-3 edits anywhere in the tree
  (a value replaced by a value of any type, a key deleted, an unknown key added, a
  list emptied, the whole document replaced by a non-mapping), dumped back to YAML;
- **mutated bytes**: the real file (or a mutated one) with bytes inserted (invalid
  UTF-8, NUL, BOMs), cut short or with a slice removed;
- **hostile documents**: nesting thousands of levels deep, integers of thousands of
  digits, ``1.0e+999``/``.nan``, impossible dates, Python and unknown tags, recursive
  aliases, UTF-16, top-level lists and scalars.

``assert_loads_or_config_error(load, path)`` is the property every loader must hold.
"""

from __future__ import annotations

import copy
import math
from pathlib import Path

import yaml
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from driftgate.core.yamlconfig import ConfigError

FUZZ = settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

key_names = st.one_of(
    st.text(max_size=12),
    st.sampled_from(["", " ", "\x00", "\ud800", "\udcff", "extra", "bogus", "__class__", "<<"]),
)
leaves = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.integers(300, 4000).map(lambda digits: 10**digits),  # dumps as a plain literal
    st.floats(),  # NaN and infinities included: .nan, .inf
    st.sampled_from([0, -1, 1e-320, 1.7e308, -0.0, 2**63, -(2**63) - 1]),
    st.text(st.characters(codec=None, exclude_categories=()), max_size=20),  # NUL, surrogates
    st.binary(max_size=8),  # !!binary
    st.dates(),  # !!timestamp
    st.sampled_from(["1h", "* * * * *", "all", "val", "test", "float", "int", "NaN", "inf"]),
)
yaml_values = st.recursive(
    leaves,
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(st.one_of(key_names, st.integers(), st.none()), children, max_size=4)
    ),
    max_leaves=12,
)


def _containers(node, path=()):
    """Paths of every dict and list in the document (the root included)."""
    if isinstance(node, dict | list):
        yield path
        items = node.items() if isinstance(node, dict) else enumerate(node)
        for key, child in items:
            yield from _containers(child, (*path, key))


def _at(node, path):
    for key in path:
        node = node[key]
    return node


@st.composite
def mutated_documents(draw, document) -> object:
    """``document`` with 1-3 random edits."""
    doc = copy.deepcopy(document)
    for _ in range(draw(st.integers(1, 3))):
        if not isinstance(doc, dict | list):
            break
        path = draw(st.sampled_from(list(_containers(doc))))
        node = _at(doc, path)
        operation = draw(st.sampled_from(["replace", "replace", "delete", "add", "clear", "root"]))
        keys = list(node.keys()) if isinstance(node, dict) else list(range(len(node)))
        if operation == "replace" and keys:
            node[draw(st.sampled_from(keys))] = draw(yaml_values)
        elif operation == "delete" and keys:
            del node[draw(st.sampled_from(keys))]
        elif operation == "add":
            if isinstance(node, dict):
                node[draw(key_names)] = draw(yaml_values)
            else:
                node.append(draw(yaml_values))
        elif operation == "clear":
            node.clear()
        elif operation == "root":
            doc = draw(st.one_of(leaves, st.lists(yaml_values, max_size=3)))
    return doc


def _dump(document) -> str:
    return yaml.safe_dump(document, allow_unicode=True, sort_keys=False)


@st.composite
def mutated_bytes(draw, data: bytes) -> bytes:
    operation = draw(st.sampled_from(["insert", "cut", "remove"]))
    at = draw(st.integers(0, len(data)))
    if operation == "insert":
        junk = draw(
            st.one_of(
                st.binary(min_size=1, max_size=6),
                st.sampled_from([b"\xff", b"\xc3\x28", b"\xed\xa0\x80", b"\x00", b"\xef\xbb\xbf"]),
                st.sampled_from([b"\n  ", b": ", b"- ", b"{", b"[", b"&a ", b"*a", b"!!", b"%"]),
            )
        )
        return data[:at] + junk + data[at:]
    if operation == "cut":
        return data[:at]
    end = draw(st.integers(at, min(len(data), at + 40)))
    return data[:at] + data[end:]


def _deep_flow(depth: int, key: str) -> str:
    return f"{key}: " + "[" * depth + "]" * depth + "\n"


def _deep_block(depth: int, key: str) -> str:
    return (
        "".join("  " * i + f"{key if i == 0 else 'k'}:\n" for i in range(depth))
        + "  " * depth
        + "x"
    )


@st.composite
def hostile_documents(draw, top_keys: list[str]) -> bytes:
    key = draw(st.sampled_from(top_keys))
    text = draw(
        st.one_of(
            st.integers(50, 20_000).map(lambda d: _deep_flow(d, key)),
            st.integers(2, 300).map(lambda d: _deep_block(d, key)),
            st.integers(300, 6_000).map(lambda n: f"{key}: {'9' * n}\n"),
            st.integers(300, 6_000).map(lambda n: f"{key}: 0x{'f' * n}\n"),
            st.sampled_from(
                [
                    f"{key}: 1.0e+999\n",
                    f"{key}: -.inf\n",
                    f"{key}: .nan\n",
                    f"{key}: 2021-02-30\n",
                    f"{key}: 0000-01-01\n",
                    f"{key}: 2021-01-01 25:61:61\n",
                    f"{key}: !!python/object/apply:os.system ['true']\n",
                    f"{key}: !!python/name:os.system\n",
                    f"{key}: !custom {{a: 1}}\n",
                    f"{key}: !!set {{a, b}}\n",
                    f"{key}: !!omap [a: 1, b: 2]\n",
                    f"{key}: !!int 'x'\n",
                    f"{key}: !!float 'nan'\n",
                    f"{key}: &a [*a]\n",
                    f"{key}: *undefined\n",
                    f"{key}: &a {{b: *a}}\n",
                    f"{key}: {{}}\n{key}: []\n",  # duplicate key: the last wins
                    f"<<: {{{key}: 1}}\n",
                    "- a\n- b\n",
                    "42\n",
                    "'just text'\n",
                    "~\n",
                    "",
                    "---\na: 1\n---\nb: 2\n",
                    "%YAML 1.1\n---\n{}\n",
                    "? [a, b]\n: c\n",
                    "\t- tab\n",
                ]
            ),
        )
    )
    encoding = draw(st.sampled_from(["utf-8", "utf-8", "utf-8", "utf-16", "latin-1", "utf-8-sig"]))
    return text.encode(encoding, errors="replace")


def yaml_files(real_text: str, top_keys: list[str]):
    """The bytes of a file, as described in the module docstring."""
    document = yaml.safe_load(real_text)
    mutated_text = mutated_documents(document).map(
        lambda doc: _dump(doc).encode("utf-8", errors="surrogatepass")
    )
    return st.one_of(
        mutated_text,
        mutated_text.flatmap(mutated_bytes),
        mutated_bytes(real_text.encode("utf-8")),
        hostile_documents(top_keys),
    )


def assert_loads_or_config_error(load, path: Path, names: str | Path | None = None):
    """``load(path)`` returns a model whose numbers are all finite, or raises
    ConfigError whose first line names the file (``names``, default ``path``); any
    other exception fails the test."""
    try:
        loaded = load(path)
    except ConfigError as exc:
        first_line = str(exc).splitlines()[0] if str(exc) else ""
        assert first_line.startswith(f"{names or path}"), str(exc)[:500]
        return None
    assert all(math.isfinite(x) for x in _floats(loaded.model_dump())), loaded
    return loaded


def _floats(node):
    if isinstance(node, float):
        yield node
    elif isinstance(node, dict):
        for value in node.values():
            yield from _floats(value)
    elif isinstance(node, list | tuple):
        for value in node:
            yield from _floats(value)


def write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path
