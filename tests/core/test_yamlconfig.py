"""Bounded configuration loading: size caps and alias expansion ("billion laughs").

Each hostile file is refused with a ConfigError naming the file and the limit, in
well under a second: before the limits, a 50 MB YAML was still parsing after 150 s at
3.6 GB, and a few KB of nested anchors expanded to billions of values in pydantic.
"""

from __future__ import annotations

import time

import pytest

from driftgate.config import load_config
from driftgate.core.yamlconfig import (
    MAX_ALIAS_EXPANSION,
    MAX_CONFIG_BYTES,
    ConfigError,
    parse_yaml,
    read_yaml_mapping,
)
from driftgate.data_contracts import Contract
from driftgate.gates.config import load_gate_config
from tests.conftest import REPO_ROOT


def billion_laughs(levels: int = 9, width: int = 10) -> str:
    """``levels`` anchors, each a list of ``width`` aliases of the one before it."""
    lines = ["a0: &a0 [lol]"]
    for level in range(1, levels + 1):
        aliases = ", ".join([f"*a{level - 1}"] * width)
        lines.append(f"a{level}: &a{level} [{aliases}]")
    return "\n".join(lines) + "\n"


def test_the_committed_files_are_far_below_the_size_cap():
    for path in (
        "driftgate.yaml",
        "params.yaml",
        "gates/gates.yaml",
        "data_contracts/rainfall.yaml",
    ):
        assert (REPO_ROOT / path).stat().st_size * 100 < MAX_CONFIG_BYTES, path


@pytest.mark.parametrize("name", ["driftgate.yaml", "params.yaml", "gates.yaml", "contract.yaml"])
def test_a_file_over_the_cap_is_refused_before_it_is_parsed(tmp_path, name):
    path = tmp_path / name
    # 50 MB of valid YAML: one list item per line, parsed at about 1 MB/s before the cap.
    with path.open("w") as file:
        file.write("items:\n")
        file.write("- 1\n" * (50 * 1024 * 1024 // 4))
    loaders = {
        "driftgate.yaml": lambda: load_config(path),
        "params.yaml": lambda: read_yaml_mapping(path),
        "gates.yaml": lambda: load_gate_config(path),
        "contract.yaml": lambda: Contract.load(path),
    }
    started = time.perf_counter()
    with pytest.raises(ConfigError) as raised:
        loaders[name]()
    assert time.perf_counter() - started < 2
    message = str(raised.value)
    assert message.startswith(f"{path}: too large: 50.0 MiB")
    assert "over the 1.0 MiB limit" in message


def test_a_file_just_under_the_cap_still_loads(tmp_path):
    path = tmp_path / "params.yaml"
    body = "train:\n  seed: 1\n"
    path.write_text(body + "#" * (MAX_CONFIG_BYTES - len(body) - 1) + "\n")
    assert path.stat().st_size == MAX_CONFIG_BYTES
    assert read_yaml_mapping(path) == {"train": {"seed": 1}}


def test_text_over_the_cap_is_refused_too():
    with pytest.raises(ConfigError, match=r"^<text>: too large"):
        parse_yaml("x: " + "y" * MAX_CONFIG_BYTES, "<text>")


@pytest.mark.parametrize("name", ["driftgate.yaml", "gates.yaml", "contract.yaml"])
def test_billion_laughs_is_refused_in_milliseconds(tmp_path, name):
    path = tmp_path / name
    path.write_text(billion_laughs())
    assert path.stat().st_size < 1000  # ...expanding to 10**9 values
    loaders = {
        "driftgate.yaml": lambda: load_config(path),
        "gates.yaml": lambda: load_gate_config(path),
        "contract.yaml": lambda: Contract.load(path),
    }
    started = time.perf_counter()
    with pytest.raises(ConfigError) as raised:
        loaders[name]()
    assert time.perf_counter() - started < 2
    assert str(raised.value).startswith(f"{path}: not valid YAML: aliases expand ")
    assert f"at most {MAX_ALIAS_EXPANSION:,} more" in str(raised.value)


def test_moderate_aliases_still_load():
    """Anchors that share a few settings are what aliases are for."""
    text = "base: &base {window: 7d, threshold: 0.1}\n" + "".join(
        f"m{i}: *base\n" for i in range(100)
    )
    data = parse_yaml(text, "<text>")
    assert data["m99"] == {"window": "7d", "threshold": 0.1}
    assert parse_yaml(billion_laughs(levels=4), "<text>")["a4"][0][0][0][0] == ["lol"]


def test_a_recursive_alias_is_refused():
    with pytest.raises(ConfigError, match=r"^<text>: not valid YAML: an alias refers to itself"):
        parse_yaml("a: &a [1, *a]\n", "<text>")
