import numpy as np
import pytest
import torch

from driftgate.training.train import TrainingDivergedError, TrainParams, train_classifier


def separable(n: int = 600, seed: int = 0):
    rng = np.random.default_rng(seed)
    x = (rng.normal(size=(n, 4)) * [1, 10, 0.1, 100] + [0, 50, -3, 7]).astype(np.float32)
    y = (x[:, 0] + (x[:, 1] - 50) / 10 > 0).astype(np.float32)
    return x[: n // 2], y[: n // 2], x[n // 2 :], y[n // 2 :]


def fast_params(**overrides) -> TrainParams:
    return TrainParams(**{"max_epochs": 40, "batch_size": 64, "lr": 0.01, **overrides})


def test_learns_a_separable_problem():
    train_x, train_y, val_x, val_y = separable()
    result = train_classifier(train_x, train_y, val_x, val_y, fast_params())
    with torch.no_grad():
        predicted = result.model(torch.as_tensor(val_x)).numpy() >= 0.5
    assert (predicted == val_y.astype(bool)).mean() > 0.95


def test_same_seed_same_weights_other_seed_other_weights():
    data = separable()
    first = train_classifier(*data, fast_params(max_epochs=3)).model.state_dict()
    again = train_classifier(*data, fast_params(max_epochs=3)).model.state_dict()
    other = train_classifier(*data, fast_params(max_epochs=3, seed=7)).model.state_dict()
    for name in first:
        torch.testing.assert_close(first[name], again[name], rtol=0, atol=0)
    assert not torch.equal(first["network.0.weight"], other["network.0.weight"])


def test_standardization_comes_from_the_training_rows_only():
    train_x, train_y, val_x, val_y = separable()
    result = train_classifier(train_x, train_y, val_x + 1_000, val_y, fast_params(max_epochs=1))
    np.testing.assert_allclose(result.model.feature_mean.numpy(), train_x.mean(axis=0), rtol=1e-5)
    np.testing.assert_allclose(result.model.feature_std.numpy(), train_x.std(axis=0), rtol=1e-5)


def test_early_stopping_keeps_the_best_epoch():
    data = separable()
    result = train_classifier(*data, fast_params(max_epochs=500, patience=2, min_delta=0.01))
    assert result.stopped_early
    assert result.epochs_run < 500
    assert result.epochs_run == result.best_epoch + 2
    # The returned weights are the best epoch's, not the last epoch's.
    loss = torch.nn.BCEWithLogitsLoss()
    with torch.no_grad():
        kept = loss(result.model.logits(torch.as_tensor(data[2])), torch.as_tensor(data[3]))
    assert kept.item() == pytest.approx(result.history[result.best_epoch - 1].val_loss, rel=1e-6)


def test_diverging_loss_is_a_clear_error():
    data = separable()
    with pytest.raises(TrainingDivergedError, match=r"loss became (nan|inf).*train\.lr"):
        train_classifier(*data, fast_params(lr=1e30, max_epochs=5))


def test_every_step_clips_the_gradient_norm(monkeypatch):
    calls = []
    real_clip = torch.nn.utils.clip_grad_norm_

    def recording_clip(parameters, max_norm, *args, **kwargs):
        parameters = list(parameters)
        norm = real_clip(parameters, max_norm, *args, **kwargs)
        after = torch.linalg.vector_norm(torch.stack([p.grad.norm() for p in parameters]))
        calls.append((max_norm, norm.item(), after.item()))
        return norm

    monkeypatch.setattr(torch.nn.utils, "clip_grad_norm_", recording_clip)
    train_x, train_y, val_x, val_y = separable()
    train_classifier(train_x, train_y, val_x, val_y, fast_params(max_epochs=1, grad_clip_norm=1e-3))
    assert len(calls) == 5  # 300 rows in batches of 64
    assert all(max_norm == 1e-3 and after <= 1e-3 * 1.0001 for max_norm, _, after in calls)
    assert any(before > 1e-3 for _, before, _ in calls)  # clipping actually bit
