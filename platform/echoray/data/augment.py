"""Batched augmentation ops with per-sample random parameters (pure torch).

Each sample's parameters are a pure function of its 64-bit augmentation key (see
seeds.py), so the same key gives the same augmentation on any actor, worker or
device, and the audit's `aug_key` identifies it exactly. Images are uint8
N x H x W x C tensors on any device; no op loops over samples in Python.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
import torch.nn.functional as F

from echoray.config import AugmentOp
from echoray.data import ops as ops_custom
from echoray.data.augment_np import CROP_RATIO, CROP_SCALE, checked_keys, crop_boxes  # noqa: F401 - crop_boxes re-exported
from echoray.data.op_shapes import crops_full_image, output_size  # noqa: F401 - re-exported
from echoray.seeds import mix, uniform


def _u(keys: np.ndarray, op_index: int, component: int, device: torch.device) -> torch.Tensor:
    """Uniform [0, 1) per sample for one (op, component): independent streams."""
    u = uniform(mix(keys, op_index), component)
    return torch.from_numpy(u).to(device=device, dtype=torch.float32)


def random_crop(x: torch.Tensor, keys: np.ndarray, i: int, padding: int) -> torch.Tensor:
    if padding == 0:
        return x
    n, h, w, _ = x.shape
    padded = F.pad(x, (0, 0, padding, padding, padding, padding))
    oy = (_u(keys, i, 0, x.device) * (2 * padding + 1)).long()
    ox = (_u(keys, i, 1, x.device) * (2 * padding + 1)).long()
    rows = oy[:, None] + torch.arange(h, device=x.device)
    cols = ox[:, None] + torch.arange(w, device=x.device)
    batch = torch.arange(n, device=x.device)[:, None, None]
    return padded[batch, rows[:, :, None], cols[:, None, :]]


def flip(x: torch.Tensor, keys: np.ndarray, i: int, p: float) -> torch.Tensor:
    mask = _u(keys, i, 0, x.device) < p
    return torch.where(mask[:, None, None, None], x.flip(2), x)


def cutout(x: torch.Tensor, keys: np.ndarray, i: int, size: int) -> torch.Tensor:
    n, h, w, _ = x.shape
    cy = (_u(keys, i, 0, x.device) * h).long()
    cx = (_u(keys, i, 1, x.device) * w).long()
    ys = torch.arange(h, device=x.device)[None, :]
    xs = torch.arange(w, device=x.device)[None, :]
    half = size // 2
    in_y = (ys >= (cy - half)[:, None]) & (ys < (cy - half + size)[:, None])
    in_x = (xs >= (cx - half)[:, None]) & (xs < (cx - half + size)[:, None])
    hole = in_y[:, :, None] & in_x[:, None, :]
    return x.masked_fill(hole[..., None], 0)


def random_resized_crop(
    x: torch.Tensor, keys: np.ndarray, i: int, size: int, scale: Sequence[float], ratio: Sequence[float]
) -> torch.Tensor:
    n, h, w, _ = x.shape
    dev = x.device
    x0, y0, cw, ch = (torch.from_numpy(v).to(dev, torch.float32) for v in crop_boxes(keys, i, w, h, scale, ratio))
    boxes = torch.stack([torch.arange(n, device=dev, dtype=torch.float32), x0, y0, x0 + cw, y0 + ch], 1)
    from torchvision.ops import roi_align  # imported here: torchvision is slow to import

    src = x.permute(0, 3, 1, 2).float()
    out = roi_align(src, boxes, output_size=(size, size), spatial_scale=1.0, sampling_ratio=0, aligned=True)
    return out.round().clamp(0, 255).to(torch.uint8).permute(0, 2, 3, 1).contiguous()


def augment_batch(x: torch.Tensor, keys: np.ndarray, ops: Sequence[AugmentOp], first: int = 0) -> torch.Tensor:
    """Apply `ops[first:]` in order; op i draws from stream i of each sample's key (ops
    before `first` were applied already, e.g. the crop made while decoding)."""
    keys = checked_keys(keys, x.shape[0])
    for i, op in enumerate(ops):
        if i < first:
            continue
        if op.op == "random_crop":
            x = random_crop(x, keys, i, op.padding)
        elif op.op == "flip":
            x = flip(x, keys, i, op.p)
        elif op.op == "cutout":
            x = cutout(x, keys, i, op.size)
        elif op.op == "random_resized_crop":
            x = random_resized_crop(x, keys, i, op.size, CROP_SCALE, CROP_RATIO)
        else:  # an op by import path (data/ops.py)
            x = ops_custom.apply_torch(x, keys, i, op)
    return x
