"""How often a shared stream's producer read each sample of each plan epoch. Pure numpy.

The proof that a stream is read once for all its consumers: every (epoch, sample_id)
the producer emitted is counted; an epoch's summary is its rows, its distinct samples
and the largest count of any one sample (1: nothing was read twice). Memory: one
counter array per open epoch; an epoch LAG behind the newest is summarised and its
array dropped (blocks of neighbouring epochs may arrive out of order when
preprocess.deterministic is false). Rows of a summarised epoch that still arrive are
counted in its rows and `late_rows` (its distinct and max_count no longer cover them).
"""

from __future__ import annotations

import numpy as np


class ReadCounter:
    LAG = 4

    def __init__(self, id_space: int):
        self.id_space = int(id_space)  # sample ids are below this
        self.open: dict[int, np.ndarray] = {}
        self.closed: dict[int, dict[str, int]] = {}

    def add(self, epoch: np.ndarray, sample_id: np.ndarray) -> None:
        epoch, sample_id = np.asarray(epoch, np.int64), np.asarray(sample_id, np.int64)
        for e in np.unique(epoch).tolist():
            n = int((epoch == e).sum())
            if e in self.closed:
                self.closed[e]["rows"] += n
                self.closed[e]["late_rows"] += n
                continue
            counts = self.open.setdefault(e, np.zeros(self.id_space, np.int32))
            np.add.at(counts, sample_id[epoch == e], 1)
        newest = max(self.open, default=None)
        for e in [e for e in self.open if newest is not None and e <= newest - self.LAG]:
            self.closed[e] = self._summary(self.open.pop(e))

    @staticmethod
    def _summary(counts: np.ndarray) -> dict[str, int]:
        return {"rows": int(counts.sum()), "distinct": int((counts > 0).sum()),
                "max_count": int(counts.max(initial=0)), "late_rows": 0}

    def summary(self) -> dict[int, dict[str, int]]:
        """epoch -> {rows, distinct, max_count}, every epoch read so far."""
        return {**self.closed, **{e: self._summary(c) for e, c in self.open.items()}}
