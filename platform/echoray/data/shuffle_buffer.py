"""A worker's local shuffle buffer over numpy blocks (pure: no Ray).

`shuffled_batches(blocks, batch_size, buffer_rows, seed)` yields exact batches of
`batch_size` rows drawn uniformly at random from a buffer that holds at least
max(`buffer_rows`, `batch_size`) rows before each draw while the stream lasts, then
drains it; every row of `blocks` is in exactly one batch, except the fewer than `batch_size`
rows left at the very end (dropped, as `drop_last`). No buffer: consecutive rows
(`exact_batches`). The draw depends only on `seed` and the blocks' rows in order, so
readers with one seed and one stream (a batch-augmentation group) make the same
batches. Every reader uses it: a worker's Ray Data stream (train/early_stream.py), a
trial on a shared stream (tune/share_consumer.py) and the tests and benchmarks that feed
train/local_run.py's loop in process, so all make the same batches from the same blocks.

Why not Ray Data's `iter_batches(local_shuffle_buffer_size=...)`: its batcher takes each
batch out of an Arrow table and converts it to numpy, about 0.5 ms a batch in the
reading thread whatever the rows' size. For small rows that thread was the pipeline's
limit: the text benchmark's byte-level sequences (65 tokens) came at 100,000 a second
with that shuffle and 118,000 without it, while the two actors alone made over a
million (`benchmarks/text_pipeline.py`; the reader's thread at a full core, the actors
idle most of the epoch). Here a block is converted once and a batch is a numpy gather.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import numpy as np

Batch = dict[str, np.ndarray]


class ShuffleBuffer:
    """Rows held in preallocated arrays; `take(k)` removes k uniformly drawn rows by
    moving the buffer's last rows into their places (O(k), not O(buffer)), so a buffer
    of large rows (decoded images) costs a batch's copy, not the buffer's."""

    def __init__(self, rng: np.random.Generator):
        self.rng = rng
        self.cols: Batch = {}
        self.n = 0

    def add(self, block: Batch) -> None:
        k = len(next(iter(block.values())))
        if not self.cols:
            self.cols = {name: np.empty((max(2 * k, 1), *v.shape[1:]), v.dtype) for name, v in block.items()}
        cap = len(next(iter(self.cols.values())))
        if self.n + k > cap:  # grow by doubling: amortized O(1) a row
            new_cap = max(2 * cap, self.n + k)
            self.cols = {name: _grown(v, self.n, new_cap) for name, v in self.cols.items()}
        for name, v in block.items():
            self.cols[name][self.n : self.n + k] = v
        self.n += k

    def take(self, k: int) -> Batch:
        """k rows drawn without replacement, uniformly among those held."""
        picked = self.rng.choice(self.n, size=k, replace=False)
        out = {name: v[picked] for name, v in self.cols.items()}  # copies, before the holes are filled
        last = self.n - k
        holes = picked[picked < last]  # picked rows below the tail: fill from the unpicked tail rows
        tail = np.setdiff1d(np.arange(last, self.n), picked, assume_unique=True)
        for v in self.cols.values():
            v[holes] = v[tail]
        self.n = last
        return out


def _grown(v: np.ndarray, n: int, cap: int) -> np.ndarray:
    out = np.empty((cap, *v.shape[1:]), v.dtype)
    out[:n] = v[:n]
    return out


def rows_before_first_batch(buffer_rows: int | None, batch_size: int) -> int:
    """Rows a reader holds before its first batch (what the read plan's first blocks must
    bring, data/pipeline.py first_block_count)."""
    return max(buffer_rows or 0, batch_size)


def shuffled_batches(blocks: Iterable[Batch], batch_size: int, buffer_rows: int | None,
                     seed: int) -> Iterator[Batch]:
    """Exact batches of `blocks`' rows through a ShuffleBuffer of `buffer_rows` (module
    docstring): a batch is drawn whenever the buffer holds `rows_before_first_batch`;
    None or 0: consecutive rows."""
    if not buffer_rows:
        yield from exact_batches(blocks, batch_size)
        return
    floor = rows_before_first_batch(buffer_rows, batch_size)
    buf = ShuffleBuffer(np.random.default_rng(seed))
    for block in blocks:
        if not len(block["sample_id"]):
            continue
        buf.add(block)
        while buf.n >= floor:
            yield buf.take(batch_size)
    while buf.n >= batch_size:
        yield buf.take(batch_size)


def exact_batches(blocks: Iterable[Batch], batch_size: int) -> Iterator[Batch]:
    """Consecutive rows of `blocks`, `batch_size` at a time, the last short batch dropped
    (iter_batches with drop_last and no shuffle does the same)."""
    held: list[Batch] = []
    n = 0
    for block in blocks:
        if not len(block["sample_id"]):
            continue
        held.append(block)
        n += len(block["sample_id"])
        if n < batch_size:
            continue
        rows = {k: np.concatenate([b[k] for b in held]) if len(held) > 1 else held[0][k] for k in block}
        cut = n - n % batch_size
        for start in range(0, cut, batch_size):
            yield {k: v[start : start + batch_size] for k, v in rows.items()}
        held = [{k: v[cut:] for k, v in rows.items()}] if n > cut else []
        n -= cut
