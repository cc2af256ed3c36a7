"""Hostile model versions, really registered: a real model's files, edited.

A test downloads one genuine version once (``Variants.of``), then registers edited
copies of its files as new versions of a model, with the genuine version's tags (the
registration mark, the data digest, the features), so the only thing wrong with each
is what the edit did. Every payload writes a marker file when it runs; a test asserts
the marker is absent after a refusal, and a control load shows that it would run.
"""

from __future__ import annotations

import io
import itertools
import pickle
import shutil
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import yaml

PT2 = "data/model.pt2"


class Payload:
    """Unpickling this runs ``exec``: what a malicious model file does."""

    def __init__(self, marker: Path) -> None:
        self.marker = str(marker)

    def __reduce__(self):
        return (exec, (f"open({self.marker!r}, 'w').write('payload ran')",))


def payload_pickle(marker: Path, protocol: int = pickle.DEFAULT_PROTOCOL) -> bytes:
    return pickle.dumps(Payload(marker), protocol=protocol)


def torch_save_payload(marker: Path) -> bytes:
    """A genuine ``torch.save`` archive whose pickle runs the payload."""
    import torch

    buffer = io.BytesIO()
    torch.save(Payload(marker), buffer)
    return buffer.getvalue()


def payload_code(marker: Path) -> str:
    """A Python file that runs the payload when imported or executed."""
    return f"open({str(marker)!r}, 'w').write('payload ran')\n"


def zip_bytes(members: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return buffer.getvalue()


def edit_mlmodel(folder: Path, edit: Callable[[dict], None]) -> None:
    path = folder / "MLmodel"
    meta = yaml.safe_load(path.read_text())
    edit(meta)
    path.write_text(yaml.safe_dump(meta))


def edit_pt2(folder: Path, edit: Callable[[dict[str, bytes]], None]) -> None:
    """Rewrite ``data/model.pt2`` with ``edit`` applied to its members (name -> bytes)."""
    path = folder / PT2
    with zipfile.ZipFile(path) as archive:
        members = {name: archive.read(name) for name in archive.namelist()}
    edit(members)
    path.write_bytes(zip_bytes(members))


@dataclass
class Variants:
    """Registers edited copies of one genuine version as versions of ``model_name``."""

    tracking: object  # TrackingSettings
    model_name: str
    pristine: Path  # the genuine version's files
    tags: dict[str, str]  # the genuine version's tags
    workdir: Path
    folders: dict[str, Path] = field(default_factory=dict)  # version -> its files
    _count: itertools.count = field(default_factory=itertools.count)

    @classmethod
    def of(cls, tracking, source_model: str, version: str, model_name: str, workdir: Path):
        import mlflow
        from mlflow import MlflowClient

        from driftgate import registry

        registry.use_store(tracking)
        pristine = Path(
            mlflow.artifacts.download_artifacts(
                artifact_uri=f"models:/{source_model}/{version}", dst_path=str(workdir / "pristine")
            )
        )
        client = MlflowClient(tracking_uri=tracking.uri, registry_uri=tracking.uri)
        tags = dict(client.get_model_version(source_model, version).tags)
        return cls(tracking, model_name, pristine, tags, workdir)

    def register(
        self, edit: Callable[[Path], None] | None = None, weights: Path | None = None
    ) -> str:
        """A new version of ``model_name`` from the pristine files with ``edit`` applied;
        ``weights`` (a folder) becomes its run's ``weights`` artifacts."""
        import mlflow
        from mlflow import MlflowClient

        from driftgate import registry

        folder = self.workdir / f"variant-{next(self._count)}"
        shutil.copytree(self.pristine, folder)
        if edit is not None:
            edit(folder)
        experiment_id = registry.connect(self.tracking)
        with mlflow.start_run(experiment_id=experiment_id) as run:
            mlflow.log_artifacts(str(folder), artifact_path="model")
            if weights is not None:
                mlflow.log_artifacts(str(weights), artifact_path="weights")
        client = MlflowClient(tracking_uri=self.tracking.uri, registry_uri=self.tracking.uri)
        if not client.search_registered_models(f"name='{self.model_name}'"):
            client.create_registered_model(self.model_name)
        version = client.create_model_version(
            self.model_name, f"{run.info.artifact_uri}/model", run_id=run.info.run_id
        ).version
        for key, value in self.tags.items():
            client.set_model_version_tag(self.model_name, version, key, value)
        self.folders[str(version)] = folder
        return str(version)

    def set_alias(self, alias: str, version: str) -> None:
        from mlflow import MlflowClient

        client = MlflowClient(tracking_uri=self.tracking.uri, registry_uri=self.tracking.uri)
        client.set_registered_model_alias(self.model_name, alias, version)


# -- the hostile shapes ------------------------------------------------------------------


def cloudpickled_pyfunc(marker: Path) -> Callable[[Path], None]:
    """The reported attack: a cloudpickled ``python_model`` loaded by MLflow's pyfunc
    loader, beside a fake ``pytorch`` flavour entry and a genuine ``model.pt2``."""
    import cloudpickle

    def edit(folder: Path) -> None:
        (folder / "python_model.pkl").write_bytes(cloudpickle.dumps(Payload(marker)))

        def hostile(meta: dict) -> None:
            pyfunc = meta["flavors"]["python_function"]
            pyfunc["loader_module"] = "mlflow.pyfunc.model"
            pyfunc["python_model"] = "python_model.pkl"
            pyfunc["cloudpickle_version"] = cloudpickle.__version__
            pyfunc.pop("data", None)
            pyfunc.pop("pickle_module_name", None)

        edit_mlmodel(folder, hostile)

    return edit


def model_from_code(marker: Path) -> Callable[[Path], None]:
    """Another loader: ``mlflow.pyfunc.model`` with ``model_code_path`` executes a Python
    file, no pickle at all (MLflow's pickle switch does not apply to it)."""

    def edit(folder: Path) -> None:
        (folder / "model_code.py").write_text(payload_code(marker))

        def hostile(meta: dict) -> None:
            pyfunc = meta["flavors"]["python_function"]
            pyfunc["loader_module"] = "mlflow.pyfunc.model"
            pyfunc["model_code_path"] = "model_code.py"
            pyfunc.pop("data", None)

        edit_mlmodel(folder, hostile)

    return edit


def sklearn_loader(marker: Path) -> Callable[[Path], None]:
    """``loader_module: mlflow.sklearn``: it unpickles the file ``data`` names."""

    def edit(folder: Path) -> None:
        (folder / "model.pkl").write_bytes(payload_pickle(marker))

        def hostile(meta: dict) -> None:
            pyfunc = meta["flavors"]["python_function"]
            pyfunc["loader_module"] = "mlflow.sklearn"
            pyfunc["data"] = "model.pkl"
            pyfunc.pop("config", None)  # mlflow.sklearn's loader takes no model config

        edit_mlmodel(folder, hostile)

    return edit


# -- code in torch.export's graph JSON -----------------------------------------------------

GRAPH = "model/models/model.json"  # the graph member inside data/model.pt2


def _python_payload(marker: Path) -> str:
    """A Python expression that writes the marker (and is truthy)."""
    return f"__import__('pathlib').Path({str(marker)!r}).write_text('payload ran')"


def edit_graph(edit: Callable[[dict], None]) -> Callable[[Path], None]:
    """An edit of a model folder that rewrites the pt2's graph JSON with ``edit``."""
    import json

    def edit_members(members: dict[str, bytes]) -> None:
        graph = json.loads(members[GRAPH])
        edit(graph)
        members[GRAPH] = json.dumps(graph).encode()

    return lambda folder: edit_pt2(folder, edit_members)


def guards_code_payload(marker: Path) -> Callable[[Path], None]:
    """``guards_code`` is compiled into the unlifted module and runs on every call."""
    return edit_graph(lambda graph: graph.update(guards_code=[f"{_python_payload(marker)}"]))


def expr_str_payload(marker: Path) -> Callable[[Path], None]:
    """A symbolic size whose ``expr_str`` sympy evaluates while the archive loads."""

    def edit(graph: dict) -> None:
        for tensor in graph["graph_module"]["graph"]["tensor_values"].values():
            for size in tensor["sizes"]:
                if "as_expr" in size:
                    symbol = size["as_expr"]["expr_str"]
                    size["as_expr"]["expr_str"] = f"{symbol}+0*len({_python_payload(marker)}*0)"
                    return
        raise AssertionError("the genuine graph has no symbolic size to edit")

    return edit_graph(edit)


def node_target(target: str) -> Callable[[Path], None]:
    """The first node calls ``target`` (resolved by getattr from torch/math/operator)."""
    return edit_graph(
        lambda graph: graph["graph_module"]["graph"]["nodes"][0].update(target=target)
    )
