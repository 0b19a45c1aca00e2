"""Ghost batch norm: normalise over virtual sub-batches of a fixed size (Hoffer et al.).

Batch augmentation multiplies the batch by M; the paper's distributed runs kept
batch-norm statistics over 32 images. In training mode the batch is split into
chunks of `virtual_batch` rows, each normalised with its own statistics; running
statistics track the mean of the chunks'. Evaluation uses them as BatchNorm does.
"""

from __future__ import annotations

import torch
from torch import nn


class GhostBatchNorm2d(nn.BatchNorm2d):
    def __init__(self, num_features: int, virtual_batch: int, **kw):
        super().__init__(num_features, **kw)
        self.virtual_batch = virtual_batch

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n = x.shape[0]
        if not self.training or n <= self.virtual_batch:
            return super().forward(x)
        chunks = x.split(self.virtual_batch, dim=0)
        return torch.cat([super(GhostBatchNorm2d, self).forward(c) for c in chunks], dim=0)


def use_ghost_batch_norm(model: nn.Module, virtual_batch: int) -> nn.Module:
    """Swap every BatchNorm2d for a GhostBatchNorm2d with the same parameters."""
    for name, child in model.named_children():
        if isinstance(child, nn.BatchNorm2d) and not isinstance(child, GhostBatchNorm2d):
            ghost = GhostBatchNorm2d(child.num_features, virtual_batch, eps=child.eps, momentum=child.momentum,
                                     affine=child.affine, track_running_stats=child.track_running_stats)
            ghost.load_state_dict(child.state_dict())
            setattr(model, name, ghost)
        else:
            use_ghost_batch_norm(child, virtual_batch)
    return model
