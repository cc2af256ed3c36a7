import os
import subprocess
import sys
from pathlib import Path

import pytest

from driftgate.config import load_config
from driftgate.core.yamlconfig import ConfigError

DRIFTGATE = [sys.executable, "-m", "driftgate.cli"]


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def test_embedded_defaults_without_a_config_file(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    config = load_config()
    assert config.model.name == "rainfall-classifier"
    assert config.tracking.uri == f"sqlite:///{tmp_path / '.driftgate' / 'mlflow.db'}"
    assert config.tracking.artifact_location == (tmp_path / ".driftgate" / "mlartifacts").as_uri()
    assert config.train.lr == pytest.approx(3e-3)
    assert not (tmp_path / ".driftgate").exists()  # loading creates nothing


def test_relative_paths_resolve_against_the_config_folder(tmp_path, monkeypatch):
    write(tmp_path / "p.yaml", "train:\n  lr: 0.5\nprepare:\n  other_stage: kept\n")
    config_file = write(tmp_path / "driftgate.yaml", "home: state\nparams: p.yaml\n")
    monkeypatch.chdir("/")
    config = load_config(config_file)
    assert config.home_dir == tmp_path / "state"
    assert config.train.lr == 0.5


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("data:\n  bogus: 1\n", r"driftgate.yaml: data.bogus: unknown key"),
        ("data:\n  reference_rows: lots\n", r"driftgate.yaml: data.reference_rows: .*integer"),
        ("model:\n  name: 'has space'\n", r"driftgate.yaml: model.name: "),
        ("data:\n  validation_share: 0.6\n  test_share: 0.5\n", r"data: .*below 1"),
        ("data:\n  source: missing.csv\n", r"data.source: file not found: .*missing.csv"),
        ("params: nope.yaml\n", r"params: file not found: .*nope.yaml"),
        ("- a list\n", r"expected a mapping"),
        ("data: [unclosed\n", r"not valid YAML"),
    ],
)
def test_bad_config_names_file_and_key(tmp_path, text, message):
    with pytest.raises(ConfigError, match=message):
        load_config(write(tmp_path / "driftgate.yaml", text))


def test_bad_params_name_the_params_file_and_key(tmp_path):
    write(tmp_path / "params.yaml", "train:\n  lr: -1\n  epochs: 3\n")
    with pytest.raises(ConfigError) as error:
        load_config(write(tmp_path / "driftgate.yaml", "{}\n"))
    assert "params.yaml: train.lr: Input should be greater than 0" in str(error.value)
    assert "params.yaml: train.epochs: unknown key" in str(error.value)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("tracking:\n  bogus: x\n", "tracking.bogus: unknown key"),
        ("data:\n  source: gone.parquet\n", "data.source: file not found"),
    ],
)
def test_cli_exits_2_naming_the_key(tmp_path, text, message):
    config_file = write(tmp_path / "driftgate.yaml", text)
    done = subprocess.run(
        [*DRIFTGATE, "train", "--config", str(config_file)],
        capture_output=True,
        text=True,
        env={**os.environ, "NO_COLOR": "1"},
        timeout=120,
    )
    assert done.returncode == 2, done.stderr
    assert message in done.stderr
    assert str(config_file) in done.stderr


def test_cli_missing_config_file_exits_2(tmp_path):
    done = subprocess.run(
        [*DRIFTGATE, "train", "--config", str(tmp_path / "absent.yaml")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2
    assert "absent.yaml: file not found" in done.stderr


def test_tracking_uri_from_the_environment_when_the_file_leaves_it_open(tmp_path, monkeypatch):
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://mlflow.example:5000")
    config = load_config(write(tmp_path / "driftgate.yaml", "home: state\n"))
    assert config.tracking.uri == "http://mlflow.example:5000"
    assert config.tracking.artifact_location is None
    pinned = load_config(write(tmp_path / "d2.yaml", "tracking:\n  uri: sqlite:///x.db\n"))
    assert pinned.tracking.uri == "sqlite:///x.db"


def test_using_one_store_does_not_redirect_the_next_config(tmp_path, monkeypatch):
    import mlflow

    from driftgate import registry

    first = load_config(write(tmp_path / "a.yaml", "home: a\n"))
    registry.use_store(first.tracking)
    assert mlflow.get_registry_uri() == first.tracking.uri
    second = load_config(write(tmp_path / "b.yaml", "home: b\n"))
    assert second.tracking.uri == f"sqlite:///{tmp_path / 'b' / 'mlflow.db'}"


def test_environment_overrides_the_file_without_writing_secrets_to_it(tmp_path, monkeypatch):
    from driftgate.config import load_config

    config_file = tmp_path / "driftgate.yaml"
    config_file.write_text("serving:\n  port: 9000\n")
    url = "postgresql://driftgate:s3cret@db:5432/samples"
    monkeypatch.setenv("DRIFTGATE__SERVING__SAMPLE_STORE_URL", url)
    monkeypatch.setenv("DRIFTGATE__SERVING__PORT", "9100")
    monkeypatch.setenv("DRIFTGATE__DATA__FEATURES", '["a", "b"]')
    config = load_config(config_file)
    assert config.serving.sample_store_url == url
    assert config.serving.port == 9100  # the environment wins over the file
    assert config.data.features == ["a", "b"]
    assert "s3cret" not in config_file.read_text()


def test_a_bad_environment_override_names_the_variable_and_key(tmp_path, monkeypatch):
    from driftgate.config import load_config

    monkeypatch.setenv("DRIFTGATE__SERVING__PORT", "eighty")
    with pytest.raises(ConfigError, match=r"\$DRIFTGATE__\*: serving.port"):
        load_config(None)
    monkeypatch.delenv("DRIFTGATE__SERVING__PORT")
    monkeypatch.setenv("DRIFTGATE__SERVING__NO_SUCH_KEY", "1")
    with pytest.raises(ConfigError, match=r"serving\.no_such_key: unknown key"):
        load_config(None)
    monkeypatch.delenv("DRIFTGATE__SERVING__NO_SUCH_KEY")
    monkeypatch.setenv("DRIFTGATE__DATA__FEATURES", "[not json")
    with pytest.raises(ConfigError, match=r"\$DRIFTGATE__DATA__FEATURES: not valid JSON"):
        load_config(None)


@pytest.mark.parametrize(
    ("sources", "message"),
    [
        ("{Bad Name: X}", r"serving\.label_sources: .*source 'Bad Name': a source name is"),
        ("{admin: X}", r"serving\.label_sources: .*source 'admin' is reserved"),
        ("{unverified: X}", r"serving\.label_sources: .*source 'unverified' is reserved"),
        ("{crm: 'not a var'}", r"serving\.label_sources: .*'not a var' is not an environment"),
    ],
)
def test_a_bad_label_source_is_refused_naming_the_key(tmp_path, sources, message):
    """Each source's name is stored with its labels and read by the retrain: a name
    that could pass for another's (admin, unverified) or is not one is refused."""
    from driftgate.config import load_config

    config_file = tmp_path / "driftgate.yaml"
    config_file.write_text(f"serving:\n  label_sources: {sources}\n")
    with pytest.raises(ConfigError, match=message):
        load_config(config_file)
