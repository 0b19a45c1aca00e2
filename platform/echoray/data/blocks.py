"""Data echoing and augmentation on any `ray.data.Dataset`: echoray's Ray Data side as
building blocks for a Ray program of your own (exported as echoray.data.*).

Rows carry `sample_id` (int64, stable per example: what fresh examples are counted by)
and `epoch` (int64; repeat_epochs adds it, echo treats a missing one as 0).

    ds = echoray.data.repeat_epochs(ray.data.from_items(rows), epochs=3, seed=0)
    ds = echoray.data.echo_dataset(ds, 1.5, seed=0)            # after the expensive upstream part
    for batch in echoray.data.echo_batches(shard, 64, shuffle_buffer=512, seed=rank):
        ...                                             # copies of a sample kept apart

No torch at import; Ray is imported by the functions that take a Dataset. (Named
echo_dataset and augment_images: echoray.data.echo and .augment are modules.)
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from echoray.config import AugmentOp
from echoray.data.echo import copy_counts, echo_rows
from echoray.seeds import STREAM_PLAN, derive_seed


def _checked_factor(factor: float) -> float:
    if isinstance(factor, bool) or not isinstance(factor, (int, float)) or not factor >= 1 or math.isinf(factor):
        raise ValueError(f"echo factor must be a finite number >= 1, got {factor!r}")
    return float(factor)


def echo_batch(batch: dict[str, np.ndarray], factor: float, seed: int = 0) -> dict[str, np.ndarray]:
    """One column batch echoed: every row repeated floor(e) + Bernoulli(frac(e)) times, the
    draw keyed by (seed, epoch, sample_id) (so it does not depend on how rows were batched),
    copies next to each other, with `echo_copy` (0..count-1) and `echo_copies` (count) added."""
    factor = _checked_factor(factor)
    if "sample_id" not in batch:
        raise ValueError(f"echo needs a 'sample_id' column (got {sorted(batch)})")
    n = len(batch["sample_id"])
    batch = {**batch, "sample_id": np.asarray(batch["sample_id"], dtype=np.int64)}
    batch.setdefault("epoch", np.zeros(n, dtype=np.int64))
    out = echo_rows(batch, factor, seed)
    out.setdefault("echo_copy", np.zeros(len(out["sample_id"]), dtype=np.int64))
    return out


def echo_dataset(ds, factor: float, *, seed: int = 0):
    """The echo operator on a ray.data.Dataset (lazy, like any Ray Data transform): the
    Dataset of echo_batch over its rows. Expected rows out = factor x rows in, exactly
    factor x for an integer factor. Put it after the part of the pipeline worth saving
    (reading, decoding) and shuffle after it (echo_batches), since copies leave together."""
    factor = _checked_factor(factor)
    return ds.map_batches(echo_batch, fn_kwargs={"factor": factor, "seed": seed}, batch_format="numpy")


def expected_copies(sample_id: np.ndarray, epoch: np.ndarray, factor: float, seed: int = 0) -> np.ndarray:
    """How many copies echo makes of each (epoch, sample_id): what a test or a budget can
    count on without running the Dataset."""
    from echoray.data.echo import echo_keys

    factor = _checked_factor(factor)
    return copy_counts(echo_keys(seed, np.asarray(epoch), np.asarray(sample_id)), factor)


def repeat_epochs(ds, epochs: int, *, seed: int | None = None):
    """`epochs` passes over ds as one Dataset with an `epoch` column (0..epochs-1): one
    stream for a whole run, as echoray trains, so echo and shuffles see epochs as keys.
    seed: shuffle each epoch's rows with its own seed (None: keep ds's order)."""
    if not isinstance(epochs, int) or epochs < 1:
        raise ValueError(f"epochs must be a positive integer, got {epochs!r}")

    def one(e: int):
        part = ds.map_batches(_with_epoch, fn_kwargs={"epoch": e}, batch_format="numpy")
        return part if seed is None else part.random_shuffle(seed=derive_seed(seed, STREAM_PLAN, e) % 2**32)

    parts = [one(e) for e in range(epochs)]
    return parts[0].union(*parts[1:]) if epochs > 1 else parts[0]


def _with_epoch(batch: dict[str, np.ndarray], epoch: int) -> dict[str, np.ndarray]:
    n = len(next(iter(batch.values()))) if batch else 0
    return {**batch, "epoch": np.full(n, epoch, dtype=np.int64)}


def echo_batches(data, batch_size: int, *, shuffle_buffer: int = 512, seed: int = 0,
                 separate_copies: bool = True) -> Iterator[dict[str, np.ndarray]]:
    """Batches of exactly batch_size rows from a Dataset or a worker's DataIterator
    (ray.train.get_dataset_shard): echoray's local shuffle buffer of `shuffle_buffer` rows
    (0: none; data/shuffle_buffer.py, as a run's workers shuffle), then echoray's packer,
    which defers a copy whose (epoch, sample_id) is already in the batch being built
    (separate_copies). floor(rows / batch_size) batches, as drop_last would: workers
    given equal row counts take equal steps."""
    from echoray.data.batching import pack_unique
    from echoray.data.shuffle_buffer import shuffled_batches

    if shuffle_buffer:
        blocks = data.iter_batches(batch_size=None, batch_format="numpy")
        it = shuffled_batches(blocks, batch_size, shuffle_buffer, seed)
    else:
        it = data.iter_batches(batch_size=batch_size, batch_format="numpy")
    return pack_unique(it, batch_size, max_carry=None if separate_copies else 0)


def augment_images(images: np.ndarray, keys: np.ndarray, ops: Sequence[AugmentOp | dict[str, Any]]) -> np.ndarray:
    """echoray's augmentation list (built-in ops and ops by import path, as in the YAML's
    preprocess.augment.ops) on a uint8 N x H x W x C batch, op i drawing from stream i of
    each image's uint64 key (train.view_keys gives batch augmentation's keys)."""
    from echoray.data import augment_np

    ops = [op if isinstance(op, AugmentOp) else AugmentOp.model_validate(op) for op in ops]
    if augment_np.handles(ops):
        return augment_np.augment_batch(np.asarray(images), keys, ops)
    import torch

    from echoray.data.augment import augment_batch

    return augment_batch(torch.from_numpy(np.ascontiguousarray(images)), keys, ops).numpy()
