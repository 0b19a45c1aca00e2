"""Exact fresh-example accounting: a sample is fresh when the FIRST of its echo copies is
trained, whichever copy index that is (issue 18).

The preprocessing actor knows how many copies of each sample it emitted and says so in
every row (`echo_copies`, data/echo.py). A worker keeps, for the samples it has begun
but not finished, {(epoch, sample_id): [copies seen, copies emitted, counted here]}:
the first copy seen counts the sample, the last one drops the entry. Memory is bounded
by what is in flight (shuffle buffer, batch packer carry), not by the dataset; samples
with a single copy (no echo, batch echo) never enter the table. A row whose count is 0
is an extra copy of a sample this worker has trained already (filling waits under auto,
train/consumption_echo.py SpareCopies): it is neither fresh nor one of the sample's planned copies.

Several workers. Ray Data's streaming_split(equal=True) hands out whole blocks while the
stream runs (copies of one sample leave the actor in one block) and cuts blocks only
when it equalises the last rows at the end of the stream (ray/data/.../output_splitter.py,
`all_inputs_done`); a restarted worker group also replays a checkpoint's unfinished
samples to whichever worker gets the block. So copies of a sample can, rarely, land on
two workers and both would count it. `reconcile` (at every evaluation, before the
counts are summed) gathers the tables of all ranks: a sample counted on several ranks
stays counted on the lowest one only, a sample whose copies were all seen somewhere is
dropped, and every rank keeps the union of the open samples (so a copy that lands on
another rank later is not counted again). The summed count is then exactly the number
of distinct (epoch, sample_id) trained so far on all ranks. Pure Python/numpy, no Ray.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from echoray.data.batching import sample_keys  # the one (epoch, sample id) key

SEEN, COPIES, COUNTED = 0, 1, 2


class FreshTracker:
    """Per-worker table of samples in flight; `observe` returns how many became fresh."""

    def __init__(self, table: dict[int, list[int]] | None = None):
        self.table: dict[int, list[int]] = table if table is not None else {}

    def observe(self, epoch: np.ndarray, sample_id: np.ndarray, copies: np.ndarray) -> int:
        copies = np.asarray(copies)
        fresh = 0
        if (copies == 1).all() and not self.table:
            return len(copies)  # no echo: every row is a sample's only copy
        for key, n in zip(sample_keys(epoch, sample_id).tolist(), copies.tolist(), strict=True):
            if n == 0:
                continue  # an extra copy of a sample counted already (train/consumption_echo.py SpareCopies)
            entry = self.table.get(key)
            if entry is None:
                fresh += 1
                if n > 1:
                    self.table[key] = [1, n, 1]
                continue
            entry[SEEN] += 1
            if entry[SEEN] >= entry[COPIES]:
                del self.table[key]
        return fresh

    def __len__(self) -> int:
        return len(self.table)

    def to_state(self) -> dict[str, list[int]]:
        """JSON-ready columns, for the checkpoint."""
        keys = list(self.table)
        return {"keys": keys, "seen": [self.table[k][SEEN] for k in keys],
                "copies": [self.table[k][COPIES] for k in keys], "counted": [self.table[k][COUNTED] for k in keys]}

    @classmethod
    def from_state(cls, state: dict[str, list[int]]) -> FreshTracker:
        return cls({int(k): [int(s), int(c), int(f)] for k, s, c, f in
                    zip(state["keys"], state["seen"], state["copies"], state["counted"], strict=True)})

    def reconcile(self, rank: int, gather: Callable[[object], list], keep: bool = True) -> int:
        """Make the ranks' summed counts exact (see the module docstring); a collective:
        every rank calls it at the same point. `gather(obj)` returns every rank's obj
        (torch.distributed.all_gather_object). Returns the change to this rank's count
        (0 or negative). keep=False: this rank reads no data (grouped mode), it keeps no table."""
        tables = gather(self.to_state())
        seen: dict[int, int] = {}
        copies: dict[int, int] = {}
        owner: dict[int, int] = {}  # the lowest rank that counted the sample
        for r, t in enumerate(tables):
            for k, s, c, f in zip(t["keys"], t["seen"], t["copies"], t["counted"], strict=True):
                seen[k] = seen.get(k, 0) + s
                copies[k] = max(copies.get(k, 0), c)
                if f and k not in owner:
                    owner[k] = r
        change = -sum(1 for k, e in self.table.items() if e[COUNTED] and owner.get(k, rank) != rank)
        # Every rank keeps each open sample; the owner carries the copies seen so far.
        self.table = {k: [seen[k] if owner.get(k) == rank else 0, copies[k], int(owner.get(k) == rank)]
                      for k in seen if seen[k] < copies[k]} if keep else {}
        return change
