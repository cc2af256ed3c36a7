import numpy as np
import torch

from driftgate.training.model import Standardization, TabularClassifier, predict_proba


def test_standardization_uses_the_given_rows_and_guards_constant_features():
    values = np.array([[1.0, 5.0], [3.0, 5.0]])
    fitted = Standardization.fit(values)
    np.testing.assert_allclose(fitted.mean, [2.0, 5.0])
    np.testing.assert_allclose(fitted.std, [1.0, 1.0])  # constant column: std 1, not 0


def test_forward_returns_one_probability_per_row():
    model = TabularClassifier(n_features=3, hidden_sizes=[4])
    probabilities = predict_proba(model, np.random.default_rng(0).normal(size=(10, 3)))
    assert probabilities.shape == (10,)
    assert ((probabilities > 0) & (probabilities < 1)).all()


def test_standardization_is_part_of_the_state_dict():
    model = TabularClassifier(
        n_features=2, standardization=Standardization(np.array([1.0, 2.0]), np.array([3.0, 4.0]))
    )
    state = model.state_dict()
    torch.testing.assert_close(state["feature_mean"], torch.tensor([1.0, 2.0]))
    torch.testing.assert_close(state["feature_std"], torch.tensor([3.0, 4.0]))
    rebuilt = TabularClassifier(**model.architecture())
    rebuilt.load_state_dict(state)
    x = np.random.default_rng(1).normal(size=(5, 2))
    np.testing.assert_array_equal(predict_proba(rebuilt, x), predict_proba(model, x))


def test_a_missing_input_is_imputed_with_the_training_mean():
    rows = np.random.default_rng(2).normal(size=(50, 3))
    model = TabularClassifier(n_features=3, standardization=Standardization.fit(rows))
    with_nan = rows[:5].copy()
    with_nan[:, 1] = np.nan
    at_mean = rows[:5].copy()
    at_mean[:, 1] = rows[:, 1].mean()
    np.testing.assert_allclose(
        predict_proba(model, with_nan), predict_proba(model, at_mean), atol=1e-6
    )
    assert np.isfinite(predict_proba(model, with_nan)).all()
