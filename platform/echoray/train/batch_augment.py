"""Batch augmentation (Hoffer et al. 2020): M differently augmented views per sample.

Pure functions over a worker batch; views are made on the training device in one
batched call (no Python loop over samples). Seeds, all derived from the config's
`seed` with the counter-based hash of seeds.py:

- read order of epoch e:      permutation from H(seed, PLAN, e)            (data/plan.py)
- sampler (shuffle) of group g: H(seed, SAMPLER, g); in `grouped` mode the group's
  first worker reads and broadcasts, so the M workers of a group see the same
  samples in the same order, and groups read disjoint shards
- augmentation of one view:   H(seed, AUGMENT, epoch, sample_id, echo copy, member, view)
  where member is the worker's index inside its group (0 in `local` mode), so
  workers of a group never share an augmentation and neither do a sample's views.
"""

from __future__ import annotations

import numpy as np
import torch

from echoray.config import AugmentOp
from echoray.data.augment import augment_batch
from echoray.seeds import STREAM_AUGMENT, mix


def view_keys(seed: int, batch: dict[str, np.ndarray], per_copy: bool, member: int, copies: int) -> np.ndarray:
    """Keys for B*M rows, sample-major (sample 0's views first), as uint64."""
    copy = batch["echo_copy"] if per_copy else np.zeros_like(batch["sample_id"])
    rep = lambda a: np.repeat(np.asarray(a), copies)  # noqa: E731
    views = np.tile(np.arange(copies), len(batch["sample_id"]))
    return mix(seed, STREAM_AUGMENT, rep(batch["epoch"]), rep(batch["sample_id"]), rep(copy), member, views)


def make_views(images: torch.Tensor, keys: np.ndarray, copies: int, ops: list[AugmentOp]) -> torch.Tensor:
    """uint8 B x H x W x C -> B*M augmented views (unaugmented copies when ops is empty:
    the views then differ only through dropout, the paper's intermediate BA)."""
    x = images.repeat_interleave(copies, dim=0) if copies > 1 else images
    return augment_batch(x, keys, ops) if ops else x


def eval_view_keys(seed: int, eval_ids: np.ndarray, views: int) -> np.ndarray:
    """Keys for test-time augmentation views (epoch -1 marks the held-out split)."""
    ids = np.repeat(np.asarray(eval_ids), views)
    return mix(seed, STREAM_AUGMENT, -1, ids, 0, 0, np.tile(np.arange(views), len(eval_ids)))


def backward_views(model: torch.nn.Module, inputs: torch.Tensor, labels: torch.Tensor, copies: int,
                   accumulate: bool, backward=torch.Tensor.backward) -> torch.Tensor:
    """Forward/backward over B*M sample-major rows; returns the mean loss as a device
    tensor (a float() here would make the host wait for the GPU every step).
    backward(loss): how to backpropagate (fp16 scales the loss first, train/device.py).

    accumulate: M passes over the B rows of view v (rows v, v+M, ...), each loss
    scaled by 1/M, so the summed gradient equals the M*B batch's (exactly, for
    models without batch norm) while holding only B rows of activations.
    """
    if not (accumulate and copies > 1):
        loss = torch.nn.functional.cross_entropy(model(inputs), labels)
        backward(loss)
        return loss.detach()
    total = torch.zeros((), device=inputs.device)
    for v in range(copies):
        loss_v = torch.nn.functional.cross_entropy(model(inputs[v::copies]), labels[v::copies]) / copies
        backward(loss_v)
        total += loss_v.detach().float()
    return total
