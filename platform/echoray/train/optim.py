"""SGD with momentum/Nesterov and weight decay, or AdamW; warmup then cosine, step or constant."""

from __future__ import annotations

import math

import torch

from echoray.config import OptimizerConfig, ScheduleConfig


def build_optimizer(params, cfg: OptimizerConfig) -> torch.optim.Optimizer:
    if cfg.name == "adamw":  # optimizer.momentum is beta1
        return torch.optim.AdamW(params, lr=cfg.lr, betas=(cfg.momentum, cfg.beta2), weight_decay=cfg.weight_decay)
    return torch.optim.SGD(
        params,
        lr=cfg.lr,
        momentum=cfg.momentum,
        nesterov=cfg.nesterov and cfg.momentum > 0,
        weight_decay=cfg.weight_decay,
    )


def lr_multiplier(epoch: float, total_epochs: float, cfg: ScheduleConfig) -> float:
    """Learning-rate multiplier at a fractional epoch (pure, so it is testable and resumable)."""
    if cfg.warmup_epochs > 0 and epoch < cfg.warmup_epochs:
        return (epoch + 1e-9) / cfg.warmup_epochs
    if cfg.name == "constant":
        return 1.0
    if cfg.name == "step":
        return cfg.gamma ** sum(epoch >= m for m in cfg.milestones)
    span = max(total_epochs - cfg.warmup_epochs, 1e-9)
    progress = min(max((epoch - cfg.warmup_epochs) / span, 0.0), 1.0)
    return 0.5 * (1.0 + math.cos(math.pi * progress))


def set_lr(opt: torch.optim.Optimizer, base_lr: float, multiplier: float) -> float:
    lr = base_lr * multiplier
    for group in opt.param_groups:
        group["lr"] = lr
    return lr
