"""`echo.factor: auto` decided at consumption time, on the worker side of the stream.

Why here and not in the preprocessing actor: Ray Data runs ahead of the workers. An
actor emits a map task's rows as one block when the task ends, and before the first
train step (tens of seconds of worker start-up on a loaded 2-core machine) it had read
the whole digits run, 20 epochs, all echoed at the start-up factor 1.0: the run trained
at e = 1.00 although the factor reached 4 within 2 s (measured: benchmarks/echo.py,
issue 14). Whatever was produced before a factor change was echoed at the old factor.

So under `auto` (echo after augmentation, or before it when the augmentation runs on
the worker) the actor emits every sample once, and the worker echoes each fresh row
when it takes it out of the stream, with the factor of that moment: echo_rows (the
same per-item floor(e) + Bernoulli(frac(e)) draw, keyed by (seed, epoch, sample_id))
into a pool of `capacity` rows (echo.shuffle_buffer) that is topped up before every
batch and from which each batch of B rows is drawn at random, copies of one sample
kept apart (the shuffle buffer and batch packer of the fixed-factor path, in one). A
factor change reaches training within one pool of rows (512 at batch 64: 8 steps).

What stays exact:
- fresh accounting: a sample's copies are all made at once, so `echo_copies` is the
  count its rows carry (accounting/fresh.py);
- replay: the rows a worker took from the stream are logged as consumed when taken (copy
  0, as the actor emitted them) and the pool of echoed rows not yet trained is saved in
  the checkpoint (as its pending rows) and put back first on restore: the restored stream
  skips the taken rows, the pool supplies their untrained copies;
- DDP lockstep: ranks echo different samples, so their row counts differ. Before the
  promised batches run out, the ranks agree (one gather) on the fewest batches every
  rank's pool can still fill: floor(pool rows / B) after topping up, at least
  capacity // B steps apart; when one rank cannot fill another batch, all stop together.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

import numpy as np

from echoray.accounting.fresh import sample_keys
from echoray.data.echo import echo_rows
from echoray.train.spare_copies import SpareCopies

Batch = dict[str, np.ndarray]


def _cat(a: Batch | None, b: Batch) -> Batch:
    return b if a is None or not len(a["sample_id"]) else {k: np.concatenate([a[k], b[k]]) for k in b}


def _rows(b: Batch | None) -> int:
    return 0 if b is None else len(b["sample_id"])


def agree_min(gather: Callable[[object], list]) -> Callable[[int], int]:
    """The fewest batches any rank can fill (a collective: every rank calls it)."""
    return lambda available: int(min(gather(int(available))))


class ConsumptionEcho:
    """Pool of echoed rows between the stream and the train step (see the module docstring).

    factor: the live echo factor (read once per fresh batch taken from the stream);
    on_take(batch): called with every fresh batch taken (the consumed log);
    agree(available) -> batches all ranks can make (world 1: available itself)."""

    def __init__(self, seed: int, batch_size: int, capacity: int, factor: Callable[[], float], rng_seed: int,
                 on_take: Callable[[Batch], None] | None = None, agree: Callable[[int], int] | None = None,
                 pool: Batch | None = None, spare: SpareCopies | None = None):
        self.seed, self.batch_size = seed, batch_size
        self.capacity = max(capacity, batch_size)
        self.factor, self.on_take = factor, on_take
        self.agree = agree or (lambda available: available)
        self.rng = np.random.default_rng(rng_seed)
        # The pool's rows in arrival order; `live` marks those not taken yet. Taken rows are
        # dropped when rows are next added (one copy per fresh batch, not one per batch taken):
        # batches of 64 crops of 64 pixels at e = 2 took 0.25-0.41 ms a batch from a pool of
        # 256 rows instead of 0.76-0.82 ms, and 0.65-0.93 from 512 instead of 2.0-2.3 (the
        # same batches: tests/unit/test_consumption_echo.py).
        self.pool: Batch | None = None
        self.live = np.zeros(0, dtype=bool)
        self._add(pool)
        self.factors: list[float] = []  # the factor of each fresh batch taken (what the run trained with)
        self.spare = spare  # under auto: extra copies instead of waiting (train/spare_copies.py)
        self.extra_batches = 0  # batches completed with extra copies
        self.exhausted = False

    def feed(self, batch: Batch) -> None:
        """Echo one fresh batch at the factor of this moment into the pool."""
        if self.on_take is not None:
            self.on_take(batch)
        e = float(self.factor())
        self.factors.append(e)
        self._add(echo_rows(batch, e, self.seed))

    def held(self) -> int:
        """Rows in the pool not taken yet."""
        return int(np.count_nonzero(self.live))

    def _add(self, rows: Batch | None) -> None:
        if not _rows(rows):
            return
        held = self.pending() if self.held() < len(self.live) else self.pool  # nothing taken: no copy
        self.pool = _cat(held, rows)
        self.live = np.ones(_rows(self.pool), dtype=bool)

    def take(self) -> Batch:
        """B random pool rows, one copy per sample where the pool allows it: a random order
        of the rows not taken yet (in arrival order), each sample's first row in it."""
        rows = np.flatnonzero(self.live)
        n = len(rows)
        perm = rows[self.rng.permutation(n)]
        keys = sample_keys(self.pool["epoch"][perm], self.pool["sample_id"][perm])
        _, first = np.unique(keys, return_index=True)
        order = np.sort(first)
        if len(order) < self.batch_size:  # too few distinct samples: copies share the batch
            order = np.concatenate([order, np.setdiff1d(np.arange(n), order)])
        chosen = perm[order[: self.batch_size]]
        self.live[chosen] = False
        return {k: v[chosen] for k, v in self.pool.items()}

    def batches(self, source: Iterable[Batch] | None) -> Iterator[Batch]:
        """The batches to train. With `spare`, a source that has `poll()` (train/early_stream.py
        StartedStream: whether its next batch is here, asking for it if not) is not waited
        for while the pool can make a batch, or while spare copies can complete one."""
        it = iter(source) if source is not None else iter(())
        poll = getattr(source, "poll", None) if self.spare is not None else None
        self.exhausted, promised = source is None, 0
        while True:
            self._top_up(it, poll)
            if promised == 0:
                promised = self.agree(self.held() // self.batch_size)
                if promised <= 0:
                    return
            promised -= 1
            batch = self.take()
            if self.spare is not None:
                self.spare.keep(batch)
            yield batch

    def _top_up(self, it: Iterator[Batch], poll: Callable[[], bool] | None) -> None:
        """Fill the pool to `capacity` with fresh rows (waiting for them), or, with `poll`,
        with the rows that are here and, where they cannot make a batch, extra copies."""
        while not self.exhausted and self.held() < self.capacity:
            if poll is not None and not poll() and self._complete_with_extras():
                return
            fresh = next(it, None)
            if fresh is None:
                self.exhausted = True
            elif len(fresh["sample_id"]):
                self.feed(fresh)

    def _complete_with_extras(self) -> bool:
        """Whether the pool holds a batch of distinct samples, after adding the spare copies
        of other samples it lacks; False where too few samples have copies left."""
        held = np.unique(sample_keys(self.pool["epoch"][self.live], self.pool["sample_id"][self.live])) \
            if self.held() else np.zeros(0, np.int64)
        if len(held) >= self.batch_size:
            return True
        extra = self.spare.extras(self.batch_size - len(held), held, self.rng)
        if extra is None:
            return False
        self._add(extra)
        self.extra_batches += 1
        return True

    def pending(self) -> Batch | None:
        """The echoed rows not trained yet (a checkpoint's pending rows)."""
        return {k: v[self.live] for k, v in self.pool.items()} if self.held() else None

