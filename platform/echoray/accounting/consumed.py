"""Which rows a stream restored from a checkpoint must skip: those a train step already took.

Workers take the multi-epoch stream through shuffle buffers, so a checkpoint at the end
of a training epoch does not fall on a read-plan epoch boundary: the last plan epoch or
two are partly consumed. Each worker logs the rows its steps consumed, as keys of
(sample_id, echo_copy) per plan epoch; at a checkpoint the epochs that all workers
together have consumed completely are dropped from the log and the rest is saved. The
restored stream starts at the first epoch still open and the preprocessing actor drops
the logged rows, before the stream is split across workers (so the workers still get
equal shares). Every (epoch, sample_id, echo_copy) is thus consumed exactly once.
Pure numpy, no Ray.
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np

from echoray.data.echo import copy_counts, echo_keys
from echoray.echo_plan import echoes_examples

COPY_BITS = 16
_COPY_MASK = (1 << COPY_BITS) - 1


def row_keys(sample_id: np.ndarray, echo_copy: np.ndarray) -> np.ndarray:
    copy = np.asarray(echo_copy, dtype=np.int64)
    if len(copy) and int(copy.max()) > _COPY_MASK:
        raise ValueError(f"echo copy {int(copy.max())} does not fit the replay key ({COPY_BITS} bits)")
    return (np.asarray(sample_id, dtype=np.int64) << COPY_BITS) | copy


def drop_consumed(rows: dict[str, np.ndarray], consumed: dict[int, np.ndarray] | None) -> dict[str, np.ndarray]:
    """The rows whose (epoch, sample_id, echo_copy) is not in `consumed` (epoch -> sorted keys)."""
    if not consumed or not len(rows["sample_id"]):
        return rows
    keep = np.ones(len(rows["sample_id"]), dtype=bool)
    keys = row_keys(rows["sample_id"], rows["echo_copy"])
    for epoch in np.unique(rows["epoch"]):
        done = consumed.get(int(epoch))
        if done is not None and len(done):
            at = np.flatnonzero(rows["epoch"] == epoch)
            keep[at] = ~np.isin(keys[at], done, assume_unique=False)
    return rows if keep.all() else {k: v[keep] for k, v in rows.items()}


def expected_rows(seed: int, epoch: int, ids: np.ndarray, stage: str, factor: float | str) -> int | None:
    """Rows plan epoch `epoch` holds for these (readable) ids; None when echo.factor is auto
    (the live factor decides the copies)."""
    if not echoes_examples(stage):
        return len(ids)
    if factor == "auto":
        return None
    return int(copy_counts(echo_keys(seed, np.int64(epoch), np.asarray(ids)), float(factor)).sum())


def first_open_epoch(rows: np.ndarray, fresh: np.ndarray, expected, n_fresh: int, done_before: int = 0) -> int:
    """The first plan epoch not yet wholly consumed, from global per-epoch counts;
    `expected(e)` is expected_rows for epoch e. Epochs before `done_before` were found
    complete earlier (their keys, hence their counts, are gone): never reopened.

    With a fixed echo factor an epoch is done when all its rows were consumed. Under
    `auto` the number of copies is not known in advance: an epoch counts as done once its
    fresh rows and the next epoch's fresh rows were all consumed (copies leave the actor
    next to their original, so none lingers a whole epoch behind it).
    """
    n = len(rows)
    for e in range(done_before, n):
        want = expected(e)
        if want is not None:
            done = rows[e] >= want
        else:
            done = fresh[e] >= n_fresh and e + 1 < n and fresh[e + 1] >= n_fresh
        if not done:
            return e
    return n


class ConsumedLog:
    """The rows one worker's steps consumed, per plan epoch (see the module docstring)."""

    def __init__(self, restored: dict[int, np.ndarray] | None = None):
        self._parts: dict[int, list[np.ndarray]] = defaultdict(list)
        for epoch, keys in (restored or {}).items():
            if len(keys):
                self._parts[int(epoch)].append(np.asarray(keys, dtype=np.int64))

    def add(self, epoch: np.ndarray, sample_id: np.ndarray, echo_copy: np.ndarray) -> None:
        keys = row_keys(sample_id, echo_copy)
        epoch = np.asarray(epoch)
        for e in np.unique(epoch):
            self._parts[int(e)].append(keys[epoch == e])

    def counts(self, n_epochs: int) -> tuple[np.ndarray, np.ndarray]:
        """(rows, fresh rows) consumed per plan epoch 0..n_epochs-1."""
        rows, fresh = np.zeros(n_epochs, np.int64), np.zeros(n_epochs, np.int64)
        for e, parts in self._parts.items():
            if e < n_epochs:
                for p in parts:
                    rows[e] += len(p)
                    fresh[e] += int(((p & _COPY_MASK) == 0).sum())
        return rows, fresh

    def keep_from(self, first_epoch: int) -> dict[int, np.ndarray]:
        """Forget epochs before `first_epoch`; the sorted keys of the rest, per epoch."""
        for e in [e for e in self._parts if e < first_epoch]:
            del self._parts[e]
        out = {}
        for e, parts in self._parts.items():
            merged = np.sort(np.concatenate(parts))
            self._parts[e] = [merged]
            out[e] = merged
        return out
