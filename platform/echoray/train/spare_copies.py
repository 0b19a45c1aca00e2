"""Extra copies of recently trained samples, for a worker that would otherwise wait.

Contract: `keep(batch)` after a batch is trained remembers its samples (one row each, the
latest `capacity` distinct samples); `extras(n, exclude, rng)` returns n rows, copies of
distinct remembered samples not in `exclude`, or None when fewer than n have copies left.
A sample's copies, planned and extra, never exceed `max_copies` (echo.max_factor). An
extra row carries `echo_copies` 0 (a copy outside the echo plan: the fresh-example table
never counts it, accounting/fresh.py) and `echo_copy` = planned copies + extras made before it,
so the audit's (epoch, sample_id, echo_copy) stays unique per trained row. Pure numpy.

Why: under `echo.factor: auto` the source can deliver in bursts (benchmarks/lm_auto_echo.py:
a text call of about 400 sequences every few seconds). A factor that follows the mean
rate still leaves the worker idle through every gap (27-50% of the run at 44be5d3, where
e = 8 waited 2-19%), and an idle step is worth less than a repeated example: the data
echoing paper's premise, at the granularity of one batch.
"""

from __future__ import annotations

import numpy as np

from echoray.data.batching import sample_keys

Batch = dict[str, np.ndarray]


class SpareCopies:
    """The last `capacity` distinct trained samples and the copies each has left."""

    def __init__(self, capacity: int, max_copies: float):
        self.capacity, self.max_copies = capacity, int(max_copies)
        self.rows: Batch | None = None
        self.made = np.zeros(0, dtype=np.int64)  # copies of each remembered sample so far

    def __len__(self) -> int:
        return 0 if self.rows is None else len(self.made)

    def keep(self, batch: Batch) -> None:
        """Remember the planned copies of a trained batch (extra rows are remembered already)."""
        planned = np.asarray(batch["echo_copies"]) > 0
        keys = sample_keys(batch["epoch"], batch["sample_id"])
        _, first = np.unique(keys, return_index=True)
        new = first[planned[first]]
        if self.rows is not None:
            new = new[~np.isin(keys[new], self._keys())]
        if not len(new):
            return
        rows = {k: np.asarray(v)[new] for k, v in batch.items()}
        made = np.asarray(rows["echo_copies"], dtype=np.int64)
        if self.rows is not None:
            rows = {k: np.concatenate([self.rows[k], rows[k]]) for k in rows}
            made = np.concatenate([self.made, made])
        cut = max(0, len(made) - self.capacity)  # the oldest go first
        self.rows, self.made = {k: v[cut:] for k, v in rows.items()}, made[cut:]

    def extras(self, n: int, exclude: np.ndarray, rng: np.random.Generator) -> Batch | None:
        """n extra rows of distinct samples outside `exclude` (sample keys), or None."""
        if self.rows is None or n <= 0:
            return None
        open_ = np.flatnonzero((self.made < self.max_copies) & ~np.isin(self._keys(), exclude))
        if len(open_) < n:
            return None
        pick = rng.choice(open_, size=n, replace=False)
        out = {k: v[pick] for k, v in self.rows.items()}
        out["echo_copy"] = self.made[pick].copy()
        out["echo_copies"] = np.zeros(n, dtype=np.int64)
        self.made[pick] += 1
        return out

    def _keys(self) -> np.ndarray:
        return sample_keys(self.rows["epoch"], self.rows["sample_id"])
