"""Models: a small CNN, CIFAR ResNet-20/32/44/56 (He et al. 2016), torchvision ResNet-50."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from echoray.config import ModelConfig


class SmallCNN(nn.Module):
    def __init__(self, in_ch: int, num_classes: int, width: int, dropout: float):
        super().__init__()

        def block(cin: int, cout: int) -> nn.Sequential:
            return nn.Sequential(
                nn.Conv2d(cin, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(inplace=True)
            )

        self.features = nn.Sequential(
            block(in_ch, width), nn.MaxPool2d(2), block(width, 2 * width), nn.MaxPool2d(2),
            block(2 * width, 4 * width), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
        )
        self.dropout = nn.Dropout(dropout)
        self.fc = nn.Linear(4 * width, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(self.dropout(self.features(x)))


class BasicBlock(nn.Module):
    """CIFAR ResNet block with the paper's option-A (parameter-free) shortcut."""

    def __init__(self, cin: int, cout: int, stride: int):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.pad = cout - cin
        self.stride = stride

    def shortcut(self, x: torch.Tensor) -> torch.Tensor:
        if self.stride == 1 and self.pad == 0:
            return x
        x = x[:, :, :: self.stride, :: self.stride]
        return F.pad(x, (0, 0, 0, 0, self.pad // 2, self.pad - self.pad // 2))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = F.relu(self.bn1(self.conv1(x)))
        return F.relu(self.bn2(self.conv2(out)) + self.shortcut(x))


class CifarResNet(nn.Module):
    def __init__(self, depth: int, in_ch: int, num_classes: int, dropout: float):
        super().__init__()
        if (depth - 2) % 6:
            raise ValueError(f"CIFAR ResNet depth must be 6n+2, got {depth}")
        n = (depth - 2) // 6
        self.stem = nn.Sequential(nn.Conv2d(in_ch, 16, 3, 1, 1, bias=False), nn.BatchNorm2d(16), nn.ReLU())
        layers, cin = [], 16
        for i, width in enumerate((16, 32, 64)):
            for j in range(n):
                layers.append(BasicBlock(cin, width, 2 if (i > 0 and j == 0) else 1))
                cin = width
        self.layers = nn.Sequential(*layers)
        self.dropout = nn.Dropout(dropout)
        self.fc = nn.Linear(64, num_classes)
        for m in self.modules():
            if isinstance(m, nn.Conv2d | nn.Linear):
                nn.init.kaiming_normal_(m.weight)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.layers(self.stem(x))
        return self.fc(self.dropout(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1)))


def build_model(cfg: ModelConfig, in_ch: int, num_classes: int, context: int | None = None) -> nn.Module:
    """num_classes: the vocabulary of a language model; context: its longest input (source.seq_len)."""
    if cfg.name == "transformer_lm":
        from echoray.train.lm import TransformerLM

        return TransformerLM(num_classes, context or 1, cfg.width, cfg.layers, cfg.heads, cfg.dropout)
    if cfg.name == "small_cnn":
        return SmallCNN(in_ch, num_classes, cfg.width, cfg.dropout)
    if cfg.name.startswith("resnet") and cfg.name != "resnet50":
        return CifarResNet(int(cfg.name.removeprefix("resnet")), in_ch, num_classes, cfg.dropout)
    from torchvision.models import resnet50

    model = resnet50(weights=None, num_classes=num_classes)
    if in_ch != 3:
        model.conv1 = nn.Conv2d(in_ch, 64, 7, 2, 3, bias=False)
    return model
