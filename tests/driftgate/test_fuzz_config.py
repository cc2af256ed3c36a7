"""Fuzzing the project config: driftgate.yaml, params.yaml and DRIFTGATE__* variables.

``load_config`` must return a ProjectConfig (every number finite) or raise
``ConfigError`` whose message starts with what was wrong: the config file, the params
file, or the environment variable. Hypothesis mutates the committed files (values of
any type, deleted and unknown keys, NUL and surrogates in paths, NaN/inf numbers),
corrupts their bytes, writes hostile documents, and sets random ``DRIFTGATE__*``
variables (JSON values nested 20,000 deep, 5,000-digit numbers, conflicting keys).
"""

from __future__ import annotations

import shutil

import pytest
from hypothesis import given
from hypothesis import strategies as st

from driftgate.config import load_config
from driftgate.core.yamlconfig import ConfigError
from tests.conftest import REPO_ROOT
from tests.yaml_mutations import FUZZ, assert_loads_or_config_error, write, yaml_files

REAL_CONFIG = (REPO_ROOT / "driftgate.yaml").read_text(encoding="utf-8")
REAL_PARAMS = (REPO_ROOT / "params.yaml").read_text(encoding="utf-8")
CONFIG_KEYS = ["home", "model", "tracking", "data", "params", "gates", "serving", "monitoring"]


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    root = tmp_path_factory.mktemp("fuzz-config")
    (root / "gates").mkdir()
    shutil.copy(REPO_ROOT / "gates" / "gates.yaml", root / "gates" / "gates.yaml")
    shutil.copy(REPO_ROOT / "params.yaml", root / "params.yaml")
    (root / "driftgate.yaml").write_text(REAL_CONFIG)
    return root


@pytest.fixture(autouse=True)
def _no_driftgate_variables(monkeypatch):
    import os

    for name in [n for n in os.environ if n.startswith("DRIFTGATE__")]:
        monkeypatch.delenv(name)


@FUZZ
@given(data=yaml_files(REAL_CONFIG, CONFIG_KEYS))
def test_config_files_load_or_raise_config_error_naming_the_file(project, data):
    path = write(project / "fuzzed.yaml", data)
    assert_loads_or_config_error(load_config, path)


@FUZZ
@given(data=yaml_files(REAL_PARAMS, ["train", "evaluate"]))
def test_params_files_load_or_raise_config_error_naming_the_params_file(project, data):
    params = write(project / "params.yaml", data)
    try:
        assert_loads_or_config_error(load_config, project / "driftgate.yaml", names=params)
    finally:
        shutil.copy(REPO_ROOT / "params.yaml", params)


env_names = st.builds(
    lambda parts: "DRIFTGATE__" + "__".join(parts),
    st.lists(
        st.one_of(
            st.sampled_from([*CONFIG_KEYS, "name", "uri", "port", "source", "train", "lr"]),
            st.text("abcXYZ_019", max_size=6),
        ),
        min_size=1,
        max_size=3,
    ),
)
env_values = st.one_of(
    st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=30),
    st.sampled_from(["NaN", "inf", "-1e999", "[1e999]", '{"a": NaN}', "{", "[", "\udcff", ""]),
    st.integers(50, 20_000).map(lambda d: "[" * d + "]" * d),
    st.integers(300, 6_000).map(lambda n: "9" * n),
    st.integers(300, 6_000).map(lambda n: "[" + "9" * n + "]"),
    st.sampled_from(['{"uri": "x"}', '["a", "b"]', '{"port": 1}', "8080", "true", "null"]),
)


@FUZZ
@given(variables=st.dictionaries(env_names, env_values, min_size=1, max_size=3))
def test_environment_overrides_load_or_raise_config_error_naming_the_variable(project, variables):
    with pytest.MonkeyPatch.context() as patch:
        for name, value in variables.items():
            patch.setenv(name, value)
        try:
            config = load_config(project / "driftgate.yaml")
        except ConfigError as exc:
            first = str(exc).splitlines()[0]
            assert first.startswith(("$DRIFTGATE__", f"{project / 'driftgate.yaml'} + $")), first
        else:
            assert config.model.name


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('home: "a\\0b"\n', "home: text contains a NUL character"),
        ('home: "a\\ud800"\n', "home: text contains an unpaired surrogate"),
        ('data: {source: "x\\0.csv"}\n', "data.source: text contains a NUL"),
        ("data: {reference_rows: " + "9" * 5000 + "}\n", "4300 digits"),
        ("serving: {pause_poll_seconds: .inf}\n", "Input should be a finite number"),
        ("serving: {batch_max_wait_ms: .nan}\n", "Input should be a finite number"),
        ("data: {start_date: 2021-02-30}\n", "cannot be read"),
        ("serving: " + "[" * 20_000 + "]" * 20_000 + "\n", "nested too deeply"),
        # is_file() raises OSError(ENAMETOOLONG) on a name past 255 bytes.
        ("params: '" + "9" * 300 + "'\n", "params: not a usable path .File name too long"),
        ("gates: " + "g" * 300 + "\n", "gates: not a usable path"),
        # home's revisions folder was stat-ed unguarded (found by the environment fuzz).
        ("home: '" + "9" * 300 + "'\n", "home: not a usable path .File name too long"),
    ],
)
def test_regressions_found_by_fuzzing(project, text, message):
    """ValueError/UnicodeEncodeError/RecursionError/OSError, or a config that loads with
    an infinite poll interval, before the fixes that came with these tests."""
    path = write(project / "regression.yaml", text.encode("utf-8", "surrogatepass"))
    with pytest.raises(ConfigError, match=message) as raised:
        load_config(path)
    assert str(raised.value).startswith(f"{path}: ")


def test_environment_regressions(project, monkeypatch):
    monkeypatch.setenv("DRIFTGATE__SERVING__PORT", "[" * 20_000 + "]" * 20_000)
    with pytest.raises(ConfigError, match=r"\$DRIFTGATE__SERVING__PORT: .*nested too deeply"):
        load_config(project / "driftgate.yaml")
    monkeypatch.setenv("DRIFTGATE__SERVING__PORT", "[" + "9" * 5000 + "]")
    with pytest.raises(ConfigError, match=r"\$DRIFTGATE__SERVING__PORT: .*4300 digits"):
        load_config(project / "driftgate.yaml")
