"""The module an image model is served behind (tracking_model.py): what a source reader
yields in, logits out. Exported by torch.export, so loading it needs no echoray."""

from __future__ import annotations

import torch
from torch import nn


class Normalized(nn.Module):
    """uint8 N x H x W x C -> (x / 255 - mean) / std as float N x C x H x W -> the network,
    the arithmetic of train/evaluate.py's Normalizer."""

    def __init__(self, net: nn.Module, mean: list[float], std: list[float]):
        super().__init__()
        self.net = net
        self.register_buffer("mean", torch.tensor(mean, dtype=torch.float32).view(1, -1, 1, 1))
        self.register_buffer("std", torch.tensor(std, dtype=torch.float32).view(1, -1, 1, 1))

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        x = images.permute(0, 3, 1, 2).float()
        return self.net((x / 255.0 - self.mean) / self.std)
