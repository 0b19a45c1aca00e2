"""Repack shuffled batches so one batch rarely holds two echoes of one example.

Even a large shuffle buffer leaves echoed copies together in a batch (a birthday
effect: at batch 64 and e = 2 a full shuffle of digits still pairs copies in most
batches), and two identical examples in a batch add nothing. The packer defers a
row whose (epoch, sample_id) is already in the batch being built to a later one.
It emits exactly floor(rows / B) batches, as drop_last would, so data-parallel
workers that receive equal row counts still take equal numbers of steps; copies it
cannot separate (too many deferred, or at the stream's end) go out as they are.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import numpy as np

Batch = dict[str, np.ndarray]
KEY_SHIFT = 40  # (epoch << 40) | sample_id: sample ids below 2**40 (1.1e12)


def sample_keys(epoch: np.ndarray, sample_id: np.ndarray) -> np.ndarray:
    """One int64 per (read-plan epoch, sample id): the key every duplicate check and the
    fresh-example table use (accounting/fresh.py, train/loop.py, the packer below)."""
    return (np.asarray(epoch, dtype=np.int64) << KEY_SHIFT) | np.asarray(sample_id, dtype=np.int64)


def _keys(b: Batch) -> np.ndarray:
    return sample_keys(b["epoch"], b["sample_id"])


def _take(b: Batch, idx: np.ndarray) -> Batch:
    return {k: v[idx] for k, v in b.items()}


def _cat(a: Batch | None, b: Batch) -> Batch:
    return b if a is None else {k: np.concatenate([a[k], b[k]]) for k in b}


def pack_unique(batches: Iterable[Batch], batch_size: int, max_carry: int | None = None) -> Iterator[Batch]:
    """Re-batch to exactly `batch_size` rows, each free of repeated keys where possible.

    max_carry: rows that may wait for a later batch (default 4 batches); 0 only
    re-batches to exact sizes, which also guards against short batches from upstream.
    """
    max_carry = 4 * batch_size if max_carry is None else max_carry
    pool: Batch | None = None
    for incoming in batches:
        if (pool is None or not len(pool["sample_id"])) and len(incoming["sample_id"]) == batch_size \
                and len(np.unique(_keys(incoming))) == batch_size:
            yield incoming  # what the loop below yields for it, without copying the rows twice
            continue
        pool = _cat(pool, incoming)
        while len(pool["sample_id"]) >= batch_size:
            _, first = np.unique(_keys(pool), return_index=True)
            first = np.sort(first)  # keep arrival order
            if len(first) >= batch_size:
                chosen = first[:batch_size]
            elif len(pool["sample_id"]) - len(first) > max_carry:
                rest = np.setdiff1d(np.arange(len(pool["sample_id"])), first)
                chosen = np.concatenate([first, rest[: batch_size - len(first)]])
            else:
                break  # wait for more rows to fill a duplicate-free batch
            mask = np.zeros(len(pool["sample_id"]), dtype=bool)
            mask[chosen] = True
            yield _take(pool, np.flatnonzero(mask))
            pool = _take(pool, np.flatnonzero(~mask))
    while pool is not None and len(pool["sample_id"]) >= batch_size:  # the stream ended
        _, first = np.unique(_keys(pool), return_index=True)
        order = np.concatenate([np.sort(first), np.setdiff1d(np.arange(len(pool["sample_id"])), first)])
        yield _take(pool, order[:batch_size])
        pool = _take(pool, order[batch_size:])
