"""A model of your own for `model.name: "my_model:mlp"` (examples/my_model.yaml).

echoray calls the factory as factory(num_classes=..., input_shape=(C, H, W), **model.kwargs)
on every worker, after the augmentation ops have set H and W, and trains what it returns:
a torch.nn.Module from float N x C x H x W batches to N x num_classes logits. The module
must be importable on every node (installed, or on PYTHONPATH).
"""

from __future__ import annotations

import math

from torch import nn


def mlp(num_classes: int, input_shape: tuple[int, int, int], hidden: int = 128, depth: int = 2,
        dropout: float = 0.0) -> nn.Module:
    """A multilayer perceptron over the flattened image: `depth` hidden layers of `hidden` units."""
    if input_shape[1] is None:
        raise ValueError("mlp needs images of a fixed size (source.image_size)")
    layers: list[nn.Module] = [nn.Flatten()]
    width = math.prod(input_shape)
    for _ in range(depth):
        layers += [nn.Linear(width, hidden), nn.BatchNorm1d(hidden), nn.ReLU(inplace=True), nn.Dropout(dropout)]
        width = hidden
    layers.append(nn.Linear(width, num_classes))
    return nn.Sequential(*layers)
