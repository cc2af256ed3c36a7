"""Missing values are learnt: training takes NaN in a numeric feature and a missing
category, imputes them inside the model and gives each its own input (issue 30).

Before: ``feature_matrix`` refused any NaN (``column 'driver_tenure' has 3507 NaN/Inf
value(s)``), so nothing here could train. One small model is trained once per module,
from real CSV and Parquet files, and checked eager, reloaded from its weights folder,
in ONNX Runtime and through the gate's export-parity and finite-outputs checks.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from driftgate.training.data import DataError, feature_matrix, feature_specs_for, read_table
from driftgate.training.flavour import (
    ARCHITECTURE_FILE,
    BUILTIN,
    FLAVOURS,
    ModelSpec,
    with_builtin_arguments,
)
from driftgate.training.inputs import model_inputs, refuse_unlearnt_missing
from driftgate.training.model import Standardization
from driftgate.training.params import TrainParams
from driftgate.training.train import seed_everything, train_model

FEATURES = ["tenure", "income", "colour"]
MISSING_SHARE = 0.1


def loan_frame(rows: int = 600, seed: int = 7) -> pd.DataFrame:
    """A target that depends on whether ``tenure`` is missing: only a model that knows
    a value was missing (its indicator) can learn it."""
    rng = np.random.default_rng(seed)
    tenure = rng.gamma(3.0, 2.0, rows)
    gone = rng.random(rows) < MISSING_SHARE
    income = rng.normal(50.0, 10.0, rows)
    colour = rng.choice(["red", "green", "blue"], rows).astype(object)
    colour[rng.random(rows) < MISSING_SHARE] = None
    default = (gone | (income < 42)).astype(int)
    return pd.DataFrame(
        {
            "tenure": np.where(gone, np.nan, tenure),
            "income": income,
            "colour": colour,
            "default": default,
        }
    )


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("missing")
    frame = loan_frame()
    frame.to_csv(folder / "loans.csv", index=False)
    frame.to_parquet(folder / "loans.parquet", index=False)
    return folder


@pytest.fixture(scope="module")
def trained(files):
    """The built-in model trained once on the CSV (a few epochs)."""
    frame = read_table(files / "loans.csv")
    train, validation = frame.iloc[:450], frame.iloc[450:]
    specs = feature_specs_for(train, FEATURES)
    spec = ModelSpec(task="binary", features=specs)
    params = TrainParams(seed=3, max_epochs=8, patience=8, lr=0.01)
    train_x, val_x = model_inputs(train, specs), model_inputs(validation, specs)
    seed_everything(params.seed)
    flavour = FLAVOURS[BUILTIN]
    model = flavour.build(spec, params, train_x, train["default"].to_numpy())
    train_model(
        model, train_x, train["default"].to_numpy(), val_x, validation["default"].to_numpy(),
        params,
    )  # fmt: skip
    return model, with_builtin_arguments(spec, model), train_x, val_x


def test_the_specs_say_which_features_were_missing_in_csv_and_parquet(files):
    for name in ("loans.csv", "loans.parquet"):
        specs = feature_specs_for(read_table(files / name), FEATURES)
        assert [(s.name, s.missing) for s in specs] == [
            ("tenure", True), ("income", False), ("colour", True)
        ]  # fmt: skip
        assert specs[2].categories == ("blue", "green", "red")


def test_the_inputs_keep_nan_and_refuse_infinity_naming_the_column(files):
    frame = read_table(files / "loans.parquet")
    specs = feature_specs_for(frame, FEATURES)
    matrix = model_inputs(frame, specs)
    assert np.isnan(matrix[:, 0]).mean() == pytest.approx(frame["tenure"].isna().mean())
    assert np.isnan(matrix[:, 2]).sum() == frame["colour"].isna().sum()
    frame.loc[5, "income"] = np.inf
    infinite = r"column 'income' has 1 infinite value\(s\) \(first at row 5\)"
    with pytest.raises(DataError, match=infinite):
        model_inputs(frame, specs)
    # Outside the model's inputs, a NaN is still refused where asked.
    with pytest.raises(DataError, match=r"column 'tenure' has \d+ NaN value"):
        feature_matrix(frame, ["tenure"])


def test_a_users_module_is_told_missing_values_are_the_builtin_models(files):
    frame = read_table(files / "loans.csv")
    told = r"column 'tenure' has \d+ missing value\(s\) in the training split .*model.factory does"
    with pytest.raises(DataError, match=told):
        refuse_unlearnt_missing(frame, feature_specs_for(frame, FEATURES), "model.factory")


def test_the_standardisation_is_learnt_on_the_values_present():
    values = np.array([[1.0, 5.0], [np.nan, 7.0], [3.0, 9.0]])
    fitted = Standardization.fit(values)
    np.testing.assert_allclose(fitted.mean, [2.0, 7.0])
    np.testing.assert_allclose(fitted.std, [1.0, np.std([5.0, 7.0, 9.0])])


def test_the_model_learns_the_missing_values_and_stores_them(trained, tmp_path):
    model, spec, _, val_x = trained
    assert spec.builtin["missing"] == [0, 2]
    assert "indicator_index" in model.state_dict()
    flavour = FLAVOURS[BUILTIN]
    flavour.save(model, spec, tmp_path)
    written = json.loads((tmp_path / ARCHITECTURE_FILE).read_text())
    assert [f.get("missing", False) for f in written["features"]] == [True, False, True]
    reloaded, reread = flavour.load(tmp_path)  # torch.load(weights_only=True)
    np.testing.assert_array_equal(flavour.predict(reloaded, val_x), flavour.predict(model, val_x))
    assert reread.features == spec.features


def test_nan_rows_score_finite_and_the_indicator_matters(trained):
    model, _, _, val_x = trained
    flavour = FLAVOURS[BUILTIN]
    rows = np.repeat(val_x[:1], 4, axis=0)
    rows[:, 1] = 40.0  # both classes reachable
    rows[1, 0] = rows[3, 0] = np.nan  # tenure missing
    rows[2, 2] = rows[3, 2] = np.nan  # colour missing
    rows[0, 0] = float(model.feature_mean[0])  # present, at the training mean
    output = flavour.predict(model, rows)
    assert np.isfinite(output).all()
    # The imputed value alone would score a missing tenure as one at the mean; the
    # indicator is what tells them apart.
    assert abs(output[1] - output[0]) > 1e-3


@pytest.mark.integration  # an ONNX export: ~20 s on the shared machine
def test_onnx_runtime_matches_eager_on_nan_rows(trained):
    import onnxruntime

    model, _, _, val_x = trained
    flavour = FLAVOURS[BUILTIN]
    rows = val_x.copy()
    assert np.isnan(rows).any()
    export = flavour.export_onnx(model, rows[:8])
    session = onnxruntime.InferenceSession(export.data, providers=["CPUExecutionProvider"])
    got = session.run(None, {export.input_name: rows})[0]
    want = flavour.predict(model, rows)
    assert np.isfinite(got).all()
    np.testing.assert_allclose(got, want, atol=1e-5)


@pytest.mark.integration  # three exports
def test_the_gate_checks_pass_with_nan_inputs(trained):
    from driftgate.gates.checks.export_parity import ExportParityCheck, check_export_parity
    from driftgate.gates.checks.finite_outputs import FiniteOutputsCheck, check_finite_outputs

    model, spec, train_x, val_x = trained
    lower, upper = np.nanmin(train_x, axis=0), np.nanmax(train_x, axis=0)
    lower[2], upper[2] = 0, spec.features[2].unseen_code
    settings = ExportParityCheck(formats=["torchscript", "torch_export", "onnx"])
    results = check_export_parity(model, val_x, settings, lower, upper)
    assert [(r.name, r.passed) for r in results] == [
        ("export_parity_torchscript", True),
        ("export_parity_torch_export", True),
        ("export_parity_onnx", True),
    ], [r.message for r in results]
    finite = check_finite_outputs(
        lambda rows: FLAVOURS[BUILTIN].predict(model, rows), val_x, lower, upper,
        FiniteOutputsCheck(),
    )  # fmt: skip
    assert finite.passed, finite.message
