"""Batch augmentation (Hoffer et al. 2020, section 4.5): M differently augmented views per sample.

Pure functions over a worker batch; views are made on the training device in one
batched call (no Python loop over samples). Seeds, all derived from the config's
`seed` with the counter-based hash of seeds.py:

- read order of epoch e:      permutation from H(seed, PLAN, e)            (data/plan.py)
- sampler (shuffle) of group g: H(seed, SAMPLER, g)                        (train/groups.py)
- augmentation of view v:     H(seed, AUGMENT, epoch, sample_id, echo copy, 0, v)

`local`: a worker makes all M views (v = 0..M-1) of each of its B samples.
`grouped`: the M members of a group hold the same B samples and member m makes
only view v = m, so the member's index is its key and the group makes exactly the
M views local mode would make, one per worker: no worker holds two views of one
sample, so batch norm never normalises copies of one image together.

Rows are view-major (view 0 of all B samples, then view 1, ...): any run of B
consecutive rows holds B distinct samples, so a ghost batch of at most B rows
(train/ghost_bn.py, contiguous chunks) never sees two views of one sample.
"""

from __future__ import annotations

import contextlib

import numpy as np
import torch

from echoray.config import AugmentOp
from echoray.data.augment import augment_batch
from echoray.seeds import STREAM_AUGMENT, STREAM_MODEL, derive_seed, mix, to_int63


def view_indices(copies: int, mode: str, member: int) -> np.ndarray:
    """The views (0..M-1) one worker makes of each of its samples."""
    if mode == "grouped":
        if not 0 <= member < copies:
            raise ValueError(f"group member {member} out of range for batch_augmentation.copies={copies}")
        return np.array([member])
    return np.arange(copies)


def view_keys(seed: int, batch: dict[str, np.ndarray], per_copy: bool, views: np.ndarray) -> np.ndarray:
    """Keys for len(views) * B rows, view-major, as uint64 (views=[0]: the CPU path's key)."""
    copy = batch["echo_copy"] if per_copy else np.zeros_like(batch["sample_id"])
    n, k = len(batch["sample_id"]), len(views)
    tile = lambda a: np.tile(np.asarray(a), k)  # noqa: E731
    return mix(seed, STREAM_AUGMENT, tile(batch["epoch"]), tile(batch["sample_id"]), tile(copy), 0,
               np.repeat(np.asarray(views), n))


def make_views(images: torch.Tensor, keys: np.ndarray, views: int, ops: list[AugmentOp]) -> torch.Tensor:
    """uint8 B x H x W x C -> views*B augmented rows, view-major (unaugmented copies when
    ops is empty: the views then differ only through dropout, the paper's intermediate BA)."""
    x = images.repeat(views, *([1] * (images.dim() - 1))) if views > 1 else images
    return augment_batch(x, keys, ops) if ops else x


def worker_views(seed: int, batch: dict[str, np.ndarray], images: torch.Tensor, labels: torch.Tensor, *,
                 per_copy: bool, views: np.ndarray, ops: list[AugmentOp], on_worker: bool):
    """One worker's training rows from its batch: (images, labels, aug_key int63, audit rows).

    on_worker=False: the batch was augmented by the CPU actors (one view, their key).
    Audit rows: epoch, sample_id, echo_copy, ba_view per training row, in row order.
    """
    k = len(views)
    if on_worker:
        keys = view_keys(seed, batch, per_copy, views)
        images = make_views(images, keys, k, ops)
        aug_key = to_int63(keys)
    else:
        aug_key = np.asarray(batch["aug_key"])
    labels = labels.repeat(k, *([1] * (labels.dim() - 1))) if k > 1 else labels  # LM targets are 2-D
    n = len(batch["sample_id"])
    rows = {"epoch": np.tile(batch["epoch"], k), "sample_id": np.tile(batch["sample_id"], k),
            "echo_copy": np.tile(batch["echo_copy"], k), "ba_view": np.repeat(np.asarray(views), n)}
    return images, labels, aug_key, rows


def step_counts(rows: int, views: int, reads: bool) -> tuple[int, int]:
    """(trained views, trained samples) one worker adds for one step of a batch of `rows`.

    Only a worker that read the batch counts samples: in `grouped` mode the group's M
    members train on one batch, which is B samples (M views), so trained samples / fresh
    is the echo factor alone, whatever M and the mode. (Fresh examples are counted by
    accounting/fresh.py: the first trained copy of each sample, on the reading worker.)"""
    return rows * views, rows if reads else 0


def eval_view_keys(seed: int, eval_ids: np.ndarray, views: int) -> np.ndarray:
    """Keys for test-time augmentation views, view-major (epoch -1 marks the held-out split)."""
    ids = np.tile(np.asarray(eval_ids), views)
    return mix(seed, STREAM_AUGMENT, -1, ids, 0, 0, np.repeat(np.arange(views), len(eval_ids)))


def backward_views(model: torch.nn.Module, inputs: torch.Tensor, labels: torch.Tensor, views: int,
                   accumulate: bool, backward=torch.Tensor.backward,
                   loss_fn=torch.nn.functional.cross_entropy) -> torch.Tensor:
    """Forward/backward over views*B view-major rows; returns the mean loss as a device
    tensor (a float() here would make the host wait for the GPU every step).
    backward(loss): how to backpropagate (fp16 scales the loss first, train/device.py).
    loss_fn(outputs, labels): the mean loss (a language model's: train/lm.py lm_loss).

    accumulate: `views` passes over the B rows of one view each, each loss scaled by
    1/views, so the summed gradient equals the whole batch's (exactly, for models
    without batch norm) while holding only B rows of activations. Under DDP the
    first views-1 passes run in no_sync(), so gradients are all-reduced once per
    step, not once per view.
    """
    if not (accumulate and views > 1):
        loss = loss_fn(model(inputs), labels)
        backward(loss)
        return loss.detach()
    n = len(labels) // views
    total = torch.zeros((), device=inputs.device)
    for v in range(views):
        last = v == views - 1
        sync = contextlib.nullcontext() if last or not hasattr(model, "no_sync") else model.no_sync()
        with sync:
            rows = slice(v * n, (v + 1) * n)
            loss_v = loss_fn(model(inputs[rows]), labels[rows]) / views
            backward(loss_v)
        total += loss_v.detach().float()
    return total


def dropout_seed(seed: int, rank: int) -> int:
    """The torch seed a worker sets after its model is built: model init stays identical
    on every rank (H(seed, MODEL)), while dropout masks differ per rank, so the members
    of a group that hold the same samples still make M different intermediate-BA views."""
    return derive_seed(seed, STREAM_MODEL, 1 + rank)
