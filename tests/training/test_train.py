import numpy as np
import pandas as pd
import pytest
import torch

from driftgate.gates.paired import compare_paired, row_losses
from driftgate.training.data import RECENT_SPLIT, split_reference
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


def changed_window(rows: int = 600, changed: int = 200, seed: int = 2) -> pd.DataFrame:
    """A retrain's recent window, in time order, whose newest third is a changed period:
    one feature shifts (as the demo's sea-level pressure) and the label follows another
    feature, with another class balance (20% positive before, about 40% after)."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(rows, 4))
    new = np.arange(rows) >= rows - changed
    x[new, 2] += 3.0
    noise = rng.normal(scale=0.3, size=rows)
    frame = pd.DataFrame(x, columns=list("abcd"))
    frame["y"] = np.where(new, x[:, 1] + noise > 0.25, x[:, 0] + noise > 0.85).astype(int)
    return frame


def test_a_recent_window_split_trains_a_candidate_that_beats_the_majority_class():
    """Minimum functionality (issue 29): on a small, imbalanced window whose newest
    third changed, the retrain's split (RECENT_SPLIT: the newest rows tested, validation
    drawn from the rest) trains a candidate that answers both classes and beats the
    majority class on the tested rows beyond sampling error, with the default
    hyper-parameters. Cut chronologically, the same window trained on the past only and
    early stopping on the changed validation rows kept a model answering one class."""
    window = changed_window()

    def fit_and_score(method: str):
        splits = split_reference(window, window.iloc[:0], 0.15, 0.15, method=method, seed=0)
        parts = (splits.train, splits.validation, splits.test)
        inputs = [part[list("abcd")].to_numpy(np.float32) for part in parts]
        targets = [part["y"].to_numpy(np.float32) for part in parts]
        result = train_classifier(inputs[0], targets[0], inputs[1], targets[1], TrainParams())
        with torch.no_grad():
            return result.model(torch.as_tensor(inputs[2])).numpy(), targets[2]

    chronological, truth = fit_and_score("chronological")
    assert (chronological >= 0.5).mean() <= 0.05  # the failure this split fixes
    outputs, truth = fit_and_score(RECENT_SPLIT)
    assert 0.1 < (outputs >= 0.5).mean() < 0.9
    prior = np.full(len(truth), truth.mean())
    losses = [row_losses("binary", "accuracy", truth, o, 0.5) for o in (outputs, prior)]
    assert compare_paired(*losses, confidence=0.95).better
