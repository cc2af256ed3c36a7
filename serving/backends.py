"""What scores a loaded version: MLflow's pyfunc, or its ONNX export in ONNX Runtime.

``serving.backend`` picks one for the whole service (``driftgate.yaml``):

* ``pyfunc`` — the registered MLflow model (pt2), through :func:`registry.load_pyfunc`
  and its allow-list;
* ``onnxruntime`` — the ONNX model the gate exported and logged on the version's run
  (``exports/model.onnx``, written by ``export_parity`` with format ``onnx``), in an
  ``onnxruntime.InferenceSession`` with the configured thread counts. A version without
  that file is refused with :class:`registry.MissingArtifactError`, naming it: the
  service never falls back to pyfunc behind the operator's back.

Both take the float32 matrix in the version's feature order and return the task's
output; :class:`driftgate.serving.champion.LoadedModel` shapes it.
"""

from __future__ import annotations

from typing import Any, Protocol

import numpy as np

from driftgate import registry
from driftgate.config import TrackingSettings
from driftgate.config.serving import ServingSettings


class Scorer(Protocol):
    def predict(self, matrix: np.ndarray) -> Any:
        """The task's output for a float32 matrix in the version's feature order."""


class OnnxRuntimeScorer:
    """An ONNX model in an ONNX Runtime session (CPU)."""

    def __init__(self, model: bytes, intra_op_threads: int, inter_op_threads: int) -> None:
        import onnxruntime

        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = intra_op_threads
        options.inter_op_num_threads = inter_op_threads
        options.execution_mode = onnxruntime.ExecutionMode.ORT_SEQUENTIAL
        options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL
        # From bytes: a model naming external data files has no folder to read them from.
        self.session = onnxruntime.InferenceSession(
            model, options, providers=["CPUExecutionProvider"]
        )
        self.input_name = self.session.get_inputs()[0].name
        self.output_names = [self.session.get_outputs()[0].name]

    def predict(self, matrix: np.ndarray) -> np.ndarray:
        return self.session.run(self.output_names, {self.input_name: matrix})[0]


class PyfuncScorer:
    """The registered MLflow model, called without MLflow's per-call input enforcement.

    MLflow's ``PyFuncModel.predict`` checks the input against the signature on every
    call; the service has already validated each record against the contract and
    built the float32 matrix in signature order, so the check is paid once, at load
    (the warm-up row goes through the full ``predict``)."""

    def __init__(self, pyfunc: Any) -> None:
        self.pyfunc = pyfunc
        # The flavour's own predict (MLflow's PyTorch wrapper); the full one otherwise.
        impl = getattr(pyfunc, "_model_impl", None)
        self._direct = getattr(impl, "predict", None)
        # A torch.export module checks its inputs' pytree structure and shape constraints
        # on every call (a pre-forward hook: a third of a one-row call, issue 32). The
        # service calls it only with the matrix it built from validated records (n >= 1
        # rows of the version's features, float32), so it is switched off by the flag
        # torch keeps for callers that validate themselves (``validate_inputs``).
        module = getattr(impl, "pytorch_model", None)
        if self._direct is not None and getattr(module, "validate_inputs", None) is True:
            module.validate_inputs = False

    def predict(self, matrix: np.ndarray) -> Any:
        if self._direct is None:
            return self.pyfunc.predict(matrix)
        return self._direct(matrix)


def load_scorer(
    tracking: TrackingSettings, model_name: str, version: str, settings: ServingSettings
) -> Scorer:
    """The configured backend's scorer for ``models:/model_name/version``."""
    if settings.backend == "onnxruntime":
        model = registry.download_onnx_model(tracking, model_name, version)
        return OnnxRuntimeScorer(model, settings.onnx_intra_op_threads,
                                 settings.onnx_inter_op_threads)  # fmt: skip
    return PyfuncScorer(registry.load_pyfunc(tracking, f"models:/{model_name}/{version}"))
