"""The model-flavour seam: built-in and factory modules, per task, and bad plug-ins."""

from __future__ import annotations

import io
import textwrap

import numpy as np
import pytest
import torch

from driftgate.core.errors import EXIT_CHECK_FAILED, EXIT_USAGE
from driftgate.core.yamlconfig import ConfigError
from driftgate.training.features import FeatureSpec, numeric_specs
from driftgate.training.flavour import (
    BuiltinFlavour,
    FactoryFlavour,
    ModelOutputError,
    ModelSpec,
    TrainingData,
    check_output_shape,
    flavour_of,
    run_user_training,
    set_plugin_root,
    with_builtin_arguments,
)
from driftgate.training.params import TrainParams
from driftgate.training.train import seed_everything, train_classifier, train_model

PARAMS = TrainParams(max_epochs=5, patience=5, hidden_sizes=[8], batch_size=32)


def numeric_rows(n=200, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 3)).astype(np.float32)
    return x, (x[:, 0] + 0.5 * x[:, 1] > 0).astype(int)


def fit(spec, x, y, params=PARAMS):
    seed_everything(params.seed)
    flavour = flavour_of(spec)
    model = flavour.build(spec, params, x[:150], y[:150])
    return train_model(model, x[:150], y[:150], x[150:], y[150:], params, spec.task).model


def test_builtin_binary_on_numeric_features_is_the_demo_model_weight_for_weight():
    """The seam must not move the demo's figures: same seed, same weights, same outputs."""
    x, y = numeric_rows()
    spec = ModelSpec(task="binary", features=tuple(numeric_specs(["a", "b", "c"])))
    through_seam = fit(spec, x, y)
    legacy = train_classifier(x[:150], y[:150], x[150:], y[150:], PARAMS).model
    assert through_seam.state_dict().keys() == legacy.state_dict().keys()
    for key, value in legacy.state_dict().items():
        torch.testing.assert_close(through_seam.state_dict()[key], value, rtol=0, atol=0)
    assert with_builtin_arguments(spec, through_seam).builtin == legacy.architecture()


def categorical_rows(n=300, seed=1):
    rng = np.random.default_rng(seed)
    colour = rng.integers(0, 3, n)  # codes of ("red", "green", "blue")
    size = rng.normal(size=n)
    label = np.where(colour == 2, 2, (size > 0).astype(int))
    x = np.column_stack([size, colour]).astype(np.float32)
    return x, label


MIXED = (FeatureSpec("size"), FeatureSpec("colour", "categorical", ("red", "green", "blue")))


def test_builtin_multiclass_embeds_categories_and_sends_unseen_and_missing_to_one_bucket():
    x, y = categorical_rows()
    spec = ModelSpec(task="multiclass", features=MIXED, classes=("a", "b", "c"))
    model = fit(spec, x, y, PARAMS.model_copy(update={"max_epochs": 40, "lr": 0.02}))
    outputs = BuiltinFlavour().predict(model, x)
    assert outputs.shape == (300, 3)
    np.testing.assert_allclose(outputs.sum(axis=1), 1.0, atol=1e-5)
    assert (outputs.argmax(axis=1) == y).mean() > 0.8
    unseen, missing, negative = (np.array([[0.3, v]], np.float32) for v in (3, np.nan, -1))
    for row in (missing, negative):
        np.testing.assert_array_equal(
            BuiltinFlavour().predict(model, row), BuiltinFlavour().predict(model, unseen)
        )
    # Exportable both ways the gate and MLflow export it, with the same outputs.
    batch = torch.export.Dim("batch", min=1)
    program = torch.export.export(model, (torch.as_tensor(x[:4]),), dynamic_shapes=({0: batch},))
    traced = torch.jit.trace(model, torch.as_tensor(x[:4]))
    buffer = io.BytesIO()
    torch.jit.save(traced, buffer)
    buffer.seek(0)
    for exported in (program.module(), torch.jit.load(buffer)):
        with torch.no_grad():
            np.testing.assert_allclose(exported(torch.as_tensor(x)).numpy(), outputs, atol=1e-6)


def test_builtin_regression_answers_in_the_targets_units_and_reloads(tmp_path):
    x, _ = numeric_rows()
    y = 200 + 40 * x[:, 0] - 10 * x[:, 2]
    spec = ModelSpec(task="regression", features=tuple(numeric_specs("abc")))
    model = fit(spec, x, y, PARAMS.model_copy(update={"max_epochs": 60, "lr": 0.01}))
    predicted = BuiltinFlavour().predict(model, x)
    assert predicted.shape == (200,)
    assert np.sqrt(((predicted - y) ** 2).mean()) < 15  # target std is ~41
    spec = with_builtin_arguments(spec, model)
    BuiltinFlavour().save(model, spec, tmp_path / "weights")
    reloaded, read_spec = BuiltinFlavour().load(tmp_path / "weights")
    assert read_spec == spec
    np.testing.assert_array_equal(BuiltinFlavour().predict(reloaded, x), predicted)


def test_a_version_logged_before_flavours_reads_as_the_builtin_binary_model():
    spec = ModelSpec.from_dict({"n_features": 2, "hidden_sizes": [4], "dropout": 0.1}, ["a", "b"])
    assert (spec.flavour, spec.task, spec.feature_names) == ("builtin", "binary", ["a", "b"])
    assert BuiltinFlavour().rebuild(spec, None).architecture()["n_features"] == 2


def plugin(tmp_path, name, body):
    (tmp_path / f"{name}.py").write_text(textwrap.dedent(body))
    set_plugin_root(tmp_path)
    return f"{name}:build"


GOOD_FACTORY = """
    from torch import nn

    def build(features, params):
        return nn.Sequential(nn.Linear(len(features), 8), nn.ReLU(),
                             nn.Linear(8, params["n_outputs"]))
"""


def test_a_factory_module_trains_exports_and_is_rebuilt_from_its_weights(tmp_path):
    x, y = categorical_rows()
    spec = ModelSpec(
        task="multiclass", features=MIXED, classes=("a", "b", "c"), flavour="factory",
        factory=plugin(tmp_path, "plug_good", GOOD_FACTORY), params={"n_outputs": 3},
    )  # fmt: skip
    model = fit(spec, x, y)
    check_output_shape(model, spec, x[:2])
    FactoryFlavour().export(model, x[:5])
    rebuilt = FactoryFlavour().rebuild(spec, model.state_dict())
    np.testing.assert_array_equal(
        FactoryFlavour().predict(rebuilt, x), FactoryFlavour().predict(model, x)
    )
    assert FactoryFlavour().predict(model, x).shape == (300, 3)


def test_a_factory_that_does_not_import_is_exit_2_naming_the_setting(tmp_path):
    set_plugin_root(tmp_path)
    spec = ModelSpec(flavour="factory", factory="no_such_module_x:build")
    with pytest.raises(
        ConfigError, match=r"model.factory: cannot import module 'no_such_module_x'"
    ):
        FactoryFlavour().build(spec, PARAMS, np.zeros((2, 1)), np.zeros(2))
    missing = ModelSpec(flavour="factory", factory=plugin(tmp_path, "plug_empty", "x = 1\n"))
    with pytest.raises(ConfigError, match=r"model.factory: module 'plug_empty' has no function"):
        FactoryFlavour().build(missing, PARAMS, np.zeros((2, 1)), np.zeros(2))
    assert ConfigError.exit_code == EXIT_USAGE


def test_a_factory_returning_something_else_is_exit_2_naming_it(tmp_path):
    spec = ModelSpec(
        flavour="factory",
        factory=plugin(tmp_path, "plug_dict", "def build(features, params):\n    return {}\n"),
    )
    with pytest.raises(
        ConfigError, match=r"model.factory 'plug_dict:build' returned dict, expected"
    ):
        FactoryFlavour().build(spec, PARAMS, np.zeros((2, 1)), np.zeros(2))


def test_a_wrong_output_shape_fails_the_output_shape_check_naming_the_factory(tmp_path):
    x, _ = categorical_rows()
    spec = ModelSpec(
        task="multiclass", features=MIXED, classes=("a", "b", "c"), flavour="factory",
        factory=plugin(tmp_path, "plug_two", GOOD_FACTORY), params={"n_outputs": 2},
    )  # fmt: skip
    model = FactoryFlavour().build(spec, PARAMS, x, None)
    with pytest.raises(ModelOutputError) as info:
        check_output_shape(model, spec, x[:2])
    assert info.value.exit_code == EXIT_CHECK_FAILED
    assert str(info.value) == (
        "model check output_shape failed: model.factory 'plug_two:build': output shape (2, 2) "
        "for 2 rows; a multiclass model (3 classes) returns (2, 3)"
    )


def test_the_users_own_training_loop_gets_the_module_and_the_data(tmp_path):
    x, y = numeric_rows()
    (tmp_path / "plug_fit.py").write_text(
        textwrap.dedent(
            """
            def fit(module, data, params):
                module.seen = (data.train_x.shape, data.spec.task, params.seed)
                return module
            """
        )
    )
    from driftgate.training.flavour import resolve_callable

    spec = ModelSpec(
        task="binary", features=tuple(numeric_specs("abc")), flavour="factory",
        factory=plugin(tmp_path, "plug_bin", GOOD_FACTORY), params={"n_outputs": 1},
        train="plug_fit:fit",
    )  # fmt: skip
    model = FactoryFlavour().build(spec, PARAMS, x, y)
    fit_fn = resolve_callable(spec.train, "model.train", tmp_path)
    trained = run_user_training(fit_fn, model, TrainingData(x, y, x, y, spec), PARAMS)
    assert trained.core.seen == ((200, 3), "binary", PARAMS.seed)
    assert FactoryFlavour().predict(trained, x).shape == (200,)
    bad = resolve_callable("plug_fit:fit", "model.train", tmp_path)
    with pytest.raises(ConfigError, match=r"model\.train 'plug_fit:fit' returned int"):
        run_user_training(lambda *a: 3, model, TrainingData(x, y, x, y, spec), PARAMS)
    assert bad is fit_fn
