"""The read plan: which chunk of the training split each epoch reads, in what order.

The whole multi-epoch plan is one stream, so Ray Data starts its pipeline once per
run instead of once per epoch. A chunk is `chunk_size` neighbouring training ids,
read together (a CIFAR file range, a Parquet row group); chunk order is a fresh
seeded permutation every epoch, and a shuffle buffer on the worker mixes within.
"""

from __future__ import annotations

import numpy as np

from echoray.seeds import STREAM_PLAN, derive_seed


def num_chunks(num_samples: int, chunk_size: int) -> int:
    return -(-num_samples // chunk_size)


def plan_chunks(idx, chunk_size: int) -> int:
    """Chunks in one epoch of the plan: a text source's chunk is one read unit of its
    training split (data/text/source.py), every other source's chunk_size training ids."""
    if idx.kind == "text":
        return len(idx.details["train_units"])
    return num_chunks(len(idx.train_ids), chunk_size)


def chunk_ids(train_ids: np.ndarray, chunk: np.ndarray, chunk_size: int) -> list[np.ndarray]:
    """The training ids each chunk index covers (the last chunk may be short)."""
    return [train_ids[c * chunk_size : (c + 1) * chunk_size] for c in np.asarray(chunk)]


def epoch_order(seed: int, epoch: int, n_chunks: int) -> np.ndarray:
    rng = np.random.default_rng(derive_seed(seed, STREAM_PLAN, epoch))
    return rng.permutation(n_chunks).astype(np.int64)


def read_plan(seed: int, epochs: int, n_chunks: int, block_chunks: int = 4096,
              first_epoch: int = 0) -> list[dict]:
    """Blocks of {"epoch", "chunk"} rows covering passes first_epoch..epochs-1, in epoch order
    (a block may span the end of one epoch and the start of the next).

    A run restored from a checkpoint starts at its first unfinished epoch; every
    epoch's order depends only on (seed, epoch), so the replayed epochs are the same.
    """
    if first_epoch >= epochs:
        return []
    chunk = np.concatenate([epoch_order(seed, e, n_chunks) for e in range(first_epoch, epochs)])
    epoch = np.repeat(np.arange(first_epoch, epochs, dtype=np.int64), n_chunks)
    return [{"epoch": epoch[s : s + block_chunks], "chunk": chunk[s : s + block_chunks]}
            for s in range(0, len(chunk), block_chunks)]


def split_holdout(num_samples: int, fraction: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(train_ids, eval_ids), both sorted, from a seeded permutation of all ids."""
    rng = np.random.default_rng(derive_seed(seed, STREAM_PLAN, -1))
    perm = rng.permutation(num_samples)
    n_eval = max(1, int(round(num_samples * fraction)))
    return np.sort(perm[n_eval:]).astype(np.int64), np.sort(perm[:n_eval]).astype(np.int64)
