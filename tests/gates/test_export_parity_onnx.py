"""export_parity with format onnx: real torch.onnx.export (dynamo) and ONNX Runtime.

Each export costs seconds, so the sound model is exported once for the module.
"""

import numpy as np
import onnx
import onnxruntime
import pytest
import torch
from pydantic import ValidationError
from torch import nn

from driftgate.gates.checks.export_parity import (
    ONNX_FILE,
    ExportParityCheck,
    check_export_parity,
    comparison_rows,
)
from driftgate.training.flavour import TaskHead
from tests.gates.test_checks import LOWER, N_FEATURES, ROWS, UPPER, small_model


class HalvesASingleRow(nn.Module):
    """A user's module that special-cases a batch of one: the export (traced on a batch
    of 64) keeps the other branch only, so the service's one-record requests diverge."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.linear = nn.Linear(N_FEATURES, 1)

    def forward(self, x):
        if x.shape[0] == 1:
            return self.linear(x) * 0.5
        return self.linear(x)


class SkipsRowsWithMissingValues(nn.Module):
    """Branches on the data itself: torch.export cannot follow it."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(N_FEATURES, 1)

    def forward(self, x):
        if torch.isnan(x).any():
            return torch.zeros(x.shape[0])
        return self.linear(x)


@pytest.fixture(scope="module")
def sound(tmp_path_factory):
    folder = tmp_path_factory.mktemp("onnx-export")
    settings = ExportParityCheck(formats=["torchscript", "onnx"])
    return folder, check_export_parity(small_model(), ROWS, settings, LOWER, UPPER, folder)


def test_formats_give_one_result_each_in_order(sound):
    _, results = sound
    assert [r.name for r in results] == ["export_parity_torchscript", "export_parity_onnx"]
    assert all(r.passed for r in results), [r.message for r in results]


def test_onnx_records_opset_and_versions_and_writes_the_file(sound):
    folder, (_, result) = sound
    assert f"onnx {onnx.__version__}" in result.observed
    assert f"onnxruntime {onnxruntime.__version__}" in result.observed
    assert "opset " in result.observed
    assert result.artifacts == (str(folder / ONNX_FILE),)
    # The file is a model ONNX Runtime runs with any batch size, NaN rows included.
    session = onnxruntime.InferenceSession(str(folder / ONNX_FILE))
    name = session.get_inputs()[0].name
    rows = comparison_rows(ROWS[:5], LOWER, UPPER)
    with torch.no_grad():
        want = small_model()(torch.as_tensor(rows)).numpy()
    got = session.run(None, {name: rows})[0]
    assert got.shape == (len(rows),) and np.abs(got - want).max() <= 1e-5


def test_comparison_rows_cover_bounds_and_a_missing_value_per_feature():
    rows = comparison_rows(ROWS[:10], LOWER, UPPER)
    for index in range(N_FEATURES):
        assert np.isnan(rows[:, index]).sum() == 1
        assert (rows[:, index] == UPPER[index]).any() and (rows[:, index] == LOWER[index]).any()


def test_an_onnx_export_that_diverges_fails_with_its_difference():
    model = TaskHead(HalvesASingleRow(), "regression").eval()
    [result] = check_export_parity(model, ROWS, ExportParityCheck(format="onnx"), LOWER, UPPER)
    assert not result.passed
    with torch.no_grad():
        one = torch.as_tensor(ROWS[:8])
        expected = max(abs(float(model(one[i : i + 1])[0] - model(one)[i])) for i in range(8))
    assert "onnx export diverges from the eager model by" in result.message
    assert result.observed.startswith(f"max |diff| {expected:.3g}")


def test_a_module_that_cannot_be_exported_fails_naming_why_not_crashing():
    model = TaskHead(SkipsRowsWithMissingValues(), "regression").eval()
    [result] = check_export_parity(model, ROWS, ExportParityCheck(format="onnx"), LOWER, UPPER)
    assert not result.passed and result.observed == "export failed"
    assert result.message.startswith("model.factory: torch.onnx.export failed:")
    assert "data-dependent" in result.message
    assert "torch.isnan(x).any()" in result.message  # the line of the user's code


@pytest.mark.parametrize(
    ("settings", "words"),
    [
        ({"format": "onnx", "formats": ["onnx"]}, "give format or formats, not both"),
        ({"formats": ["onnx", "onnx"]}, "lists a format twice"),
        ({"formats": []}, "at least 1"),
        ({"formats": ["onnx2"]}, "torchscript"),
    ],
)
def test_format_settings_are_validated(settings, words):
    with pytest.raises(ValidationError, match=words):
        ExportParityCheck(**settings)


def test_format_alone_still_selects_one_format():
    assert ExportParityCheck(format="onnx").selected == ("onnx",)
    assert ExportParityCheck().selected == ("torchscript",)
