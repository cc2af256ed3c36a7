"""serving.backend: onnxruntime over real HTTP (real uvicorn, real MLflow store).

The same records get the same probabilities as on pyfunc (to export_parity's 1e-5);
a champion without an ONNX model is refused at start and at a swap, naming the file.
"""

from __future__ import annotations

import numpy as np
import pytest

from driftgate.config.serving import ServingSettings
from tests.serving.conftest import ThreadedService, records_of, wait_for

POLL_SECONDS = 0.3
PARITY = 1e-5


def settings_for(tmp_path, backend: str) -> ServingSettings:
    return ServingSettings(
        sample_store_url=f"sqlite:///{tmp_path / f'{backend}-samples.db'}",
        control_store_url=f"sqlite:///{tmp_path / f'{backend}-control.db'}",
        model_poll_seconds=POLL_SECONDS,
        pause_poll_seconds=POLL_SECONDS,
        backend=backend,
    )


@pytest.fixture
def champion_v1(registered, onnx_exported):
    registered.set_champion(onnx_exported)
    yield onnx_exported
    registered.set_champion("1")


def answers(service, records: list[dict]) -> tuple[list, list]:
    single = [service.client.post("/predict", json={"records": [r]}) for r in records[:20]]
    batch = service.client.post("/predict", json={"records": records})
    for response in [*single, batch]:
        assert response.status_code == 200, response.text
        assert response.json()["sample_stored"] is True
    return [r.json()["probabilities"][0] for r in single], batch.json()["probabilities"]


def test_onnxruntime_answers_the_probabilities_pyfunc_answers(registered, champion_v1, tmp_path):
    records = records_of(registered.rows, 0, 200)
    results = {}
    for backend in ("pyfunc", "onnxruntime"):
        with ThreadedService(registered.config, settings_for(tmp_path, backend)) as service:
            ready = service.client.get("/readyz").json()
            assert ready["ready"] and ready["backend"] == backend
            assert ready["model_version"] == champion_v1
            results[backend] = answers(service, records)
            stored = service.state.samples.read_window("2000-01-01", "2100-01-01")
            assert len(stored) == 20 + len(records)  # every sample logged on both
    for pyfunc, onnx in zip(results["pyfunc"], results["onnxruntime"], strict=True):
        assert np.abs(np.asarray(pyfunc) - np.asarray(onnx)).max() <= PARITY
    expected = registered.expected(champion_v1, records)
    assert np.abs(np.asarray(results["onnxruntime"][1]) - expected).max() <= PARITY


def test_a_champion_without_an_onnx_model_is_refused_at_start(registered, tmp_path):
    registered.set_champion("2")  # never exported
    try:
        with ThreadedService(registered.config, settings_for(tmp_path, "onnxruntime")) as service:
            ready = service.client.get("/readyz")
            assert ready.status_code == 503
            error = ready.json()["champion_error"]
            assert "v2 has no ONNX model" in error and "exports/model.onnx" in error
            assert "serving.backend: pyfunc" in error
            answer = service.client.post(
                "/predict", json={"records": records_of(registered.rows, 0, 1)}
            )
            assert answer.status_code == 503 and "exports/model.onnx" in answer.text
    finally:
        registered.set_champion("1")


def test_a_swap_to_a_champion_without_an_onnx_model_keeps_the_old_one(
    registered, champion_v1, tmp_path
):
    records = records_of(registered.rows, 0, 3)
    with ThreadedService(registered.config, settings_for(tmp_path, "onnxruntime")) as service:
        assert service.client.get("/readyz").json()["model_version"] == champion_v1
        registered.set_champion("2")
        error = wait_for(
            lambda: service.client.get("/readyz").json()["champion_error"],
            timeout=30,
            what="the refusal of v2",
        )
        assert "v2 has no ONNX model" in error and "exports/model.onnx" in error
        answer = service.client.post("/predict", json={"records": records})
        assert answer.status_code == 200 and answer.json()["model_version"] == champion_v1
