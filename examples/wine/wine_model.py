"""The wine example's own PyTorch module, plugged in by ``model.factory: wine_model:build``.

driftgate calls ``build(features, params)`` with the feature specs (name, kind,
categories) and the ``train`` params merged with ``model.params`` and ``task``,
``n_outputs`` and ``classes``. The module returns raw scores, one per class (logits);
driftgate's trainer fits it with cross-entropy and logs it with a softmax on top, so
the served model answers one probability per cultivar.

The measurements have very different scales (proline in the hundreds, hue near 1), so
the module normalises its own inputs with a batch-norm layer: its running statistics
are learnt in training and saved with the weights, like the built-in model's buffers.
"""

from __future__ import annotations

from torch import nn


class WineNet(nn.Module):
    def __init__(self, n_features: int, n_classes: int, hidden: int) -> None:
        super().__init__()
        self.layers = nn.Sequential(
            nn.BatchNorm1d(n_features),
            nn.Linear(n_features, hidden),
            nn.ReLU(),
            nn.Linear(hidden, n_classes),
        )

    def forward(self, features):
        return self.layers(features)


def build(features, params) -> nn.Module:
    return WineNet(len(features), params["n_outputs"], int(params.get("hidden", 16)))
