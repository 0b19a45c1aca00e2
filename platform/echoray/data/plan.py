"""The read plan: which chunk of the training split each epoch reads, in what order.

The whole multi-epoch plan is one stream, so Ray Data starts its pipeline once per
run instead of once per epoch. A chunk is `chunk_size` training ids read together;
chunk order is a fresh seeded permutation every epoch. Which ids a chunk holds depends
on the source (SourceIndex.shuffled_reads):

- chunked (default: CIFAR binary batches, Parquet row groups, digits): neighbouring
  ids, which share one read; only the worker's shuffle buffer mixes within a chunk.
- shuffled (image folders, object stores: every sample its own file): the epoch's
  ids in a fresh permutation keyed by (seed, epoch), cut into chunks, so every chunk
  is a random draw and batches need no shuffle buffer to mix classes.

Either way every training id is in exactly one chunk of every epoch, so exact
accounting, replay (accounting/consumed.py) and the audit see the same rows.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from echoray.seeds import STREAM_PLAN, derive_seed

if TYPE_CHECKING:
    from echoray.config import PipelineConfig


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


def sample_order(seed: int, epoch: int, n_samples: int) -> np.ndarray:
    """Positions 0..n_samples-1 in epoch `epoch`'s order for a shuffled-reads source:
    a pure function of (seed, epoch), independent of epoch_order's draw."""
    rng = np.random.default_rng(derive_seed(seed, STREAM_PLAN, epoch, 1))
    return rng.permutation(n_samples).astype(np.int64)


class ChunkMap:
    """(epoch, chunk) plan rows -> the training ids each chunk covers.

    `shuffled`: chunks cut from sample_order(seed, epoch) (the source reads samples one
    by one); otherwise neighbouring ids (chunk_ids). The last permutations are cached:
    a plan block spans one or two epochs."""

    def __init__(self, train_ids: np.ndarray, chunk_size: int, seed: int, shuffled: bool):
        self.train_ids, self.chunk_size, self.seed, self.shuffled = train_ids, chunk_size, seed, shuffled
        self._orders: dict[int, np.ndarray] = {}

    def ids(self, epoch: np.ndarray, chunk: np.ndarray) -> list[np.ndarray]:
        if not self.shuffled:
            return chunk_ids(self.train_ids, chunk, self.chunk_size)
        k = self.chunk_size
        return [self._epoch_ids(int(e))[c * k : (c + 1) * k] for e, c in zip(np.asarray(epoch), np.asarray(chunk),
                                                                               strict=True)]

    def _epoch_ids(self, epoch: int) -> np.ndarray:
        """The training ids in epoch `epoch`'s order (the two latest epochs are kept)."""
        if epoch not in self._orders:
            if len(self._orders) >= 2:
                self._orders.pop(min(self._orders))
            self._orders[epoch] = self.train_ids[sample_order(self.seed, epoch, len(self.train_ids))]
        return self._orders[epoch]


def epoch_order(seed: int, epoch: int, n_chunks: int) -> np.ndarray:
    rng = np.random.default_rng(derive_seed(seed, STREAM_PLAN, epoch))
    return rng.permutation(n_chunks).astype(np.int64)


def block_starts(total: int, block_chunks: int, first_chunks: int | None = None, n_first: int = 0) -> list[int]:
    """Where each plan block starts: `n_first` blocks of `first_chunks` chunks, then
    blocks of `block_chunks`. A map task emits its rows when it ends, so small first
    blocks put the first rows in the stream after one actor call, not a whole block."""
    starts, s = [], 0
    small = max(1, first_chunks or block_chunks)
    while s < total:
        starts.append(s)
        s += small if len(starts) <= n_first else block_chunks
    return starts


def chunks_per_call(cfg: PipelineConfig) -> int:
    """Plan chunks per preprocessing actor call (map_batches' batch_size, data/pipeline.py)."""
    return max(1, cfg.preprocess.batch_size // cfg.source.chunk_size)


def plan_rows(seed: int, epochs: int, n_chunks: int, first_epoch: int = 0) -> dict[str, np.ndarray]:
    """Every {"epoch", "chunk"} row of passes first_epoch..epochs-1, in plan order."""
    if first_epoch >= epochs:
        return {"epoch": np.zeros(0, np.int64), "chunk": np.zeros(0, np.int64)}
    chunk = np.concatenate([epoch_order(seed, e, n_chunks) for e in range(first_epoch, epochs)])
    epoch = np.repeat(np.arange(first_epoch, epochs, dtype=np.int64), n_chunks)
    return {"epoch": epoch, "chunk": chunk}


def read_plan(seed: int, epochs: int, n_chunks: int, block_chunks: int = 4096,
              first_epoch: int = 0, first_chunks: int | None = None, n_first: int = 0) -> list[dict]:
    """Blocks of {"epoch", "chunk"} rows covering passes first_epoch..epochs-1, in epoch order
    (a block may span the end of one epoch and the start of the next); the first
    `n_first` blocks hold `first_chunks` chunks each (block_starts).

    A run restored from a checkpoint starts at its first unfinished epoch; every
    epoch's order depends only on (seed, epoch), so the replayed epochs are the same.
    """
    rows = plan_rows(seed, epochs, n_chunks, first_epoch)
    epoch, chunk = rows["epoch"], rows["chunk"]
    if not len(chunk):
        return []
    starts = block_starts(len(chunk), block_chunks, first_chunks, n_first)
    ends = [*starts[1:], len(chunk)]
    return [{"epoch": epoch[s:t], "chunk": chunk[s:t]} for s, t in zip(starts, ends, strict=True)]


def split_holdout(num_samples: int, fraction: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(train_ids, eval_ids), both sorted, from a seeded permutation of all ids."""
    rng = np.random.default_rng(derive_seed(seed, STREAM_PLAN, -1))
    perm = rng.permutation(num_samples)
    n_eval = max(1, int(round(num_samples * fraction)))
    return np.sort(perm[n_eval:]).astype(np.int64), np.sort(perm[:n_eval]).astype(np.int64)
