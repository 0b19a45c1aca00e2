"""Echo made on the worker side of the stream: under `echo.factor: auto` per example
(ConsumptionEcho), extra copies for a worker that would wait (SpareCopies), and batch echo's
repeat counts (BatchEchoDraws). The three places a worker makes copies, in one module.

Why per example here and not in the preprocessing actor: Ray Data runs ahead of the
workers, so rows an actor had already echoed kept the factor of that moment (the run
trained at e = 1.00 while the factor reached 4: benchmarks/echo.py, issue 14). Under `auto`
(echo after augmentation, or before it when the augmentation runs on the worker) the
actor emits every sample once, and the worker echoes each fresh row when it takes it out
of the stream, with the factor of that moment: echo_rows (the same per-item floor(e) +
Bernoulli(frac(e)) draw, keyed by (seed, epoch, sample_id)) into a pool of `capacity` rows
(echo.shuffle_buffer) topped up before every batch, from which each batch of B rows is
drawn at random, copies of one sample kept apart. A factor change reaches training within
one pool of rows.

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
from echoray.data.echo import batch_repeats, echo_rows

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
        self.spare = spare  # under auto: extra copies instead of waiting (train/consumption_echo.py SpareCopies)
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


class SpareCopies:
    """Extra copies of recently trained samples, for a worker that would otherwise wait: the
    last `capacity` distinct trained samples and the copies each has left.

    Contract: `keep(batch)` after a batch is trained remembers its samples (one row each, the
    latest `capacity` distinct samples); `extras(n, exclude, rng)` returns n rows, copies of
    distinct remembered samples not in `exclude`, or None when fewer than n have copies left.
    A sample's copies, planned and extra, never exceed `max_copies` (echo.max_factor). An
    extra row carries `echo_copies` 0 (a copy outside the echo plan: the fresh-example table
    never counts it, accounting/fresh.py) and `echo_copy` = planned copies + extras made before it,
    so the audit's (epoch, sample_id, echo_copy) stays unique per trained row. Pure numpy.

    Why: under `auto` a source that delivers in bursts left the worker idle through every
    gap, and an idle step is worth less than a repeated example (benchmarks/lm_auto_echo.py)."""

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


class BatchEchoDraws:
    """How often batch echo repeats each batch: batch_repeats(seed, batch index, factor),
    the same on every rank. Under `auto` rank 0 refreshes the factor every REFRESH
    batches from the collector without waiting, and one broadcast makes every rank use
    it (instead of a blocking ray.get and a broadcast per batch)."""

    REFRESH = 16

    def __init__(self, seed: int, factor: float | str, rank: int, link, broadcast_float):
        self._draw = batch_repeats
        self.seed, self.rank, self.link, self.broadcast = seed, rank, link, broadcast_float
        self.auto = factor == "auto"
        self.factor = 1.0 if self.auto else float(factor)

    def __call__(self, batch_index: int) -> int:
        if self.auto and batch_index % self.REFRESH == 0:
            live = self.link.live_factor() if self.rank == 0 else None
            self.factor = self.broadcast(float(live) if live is not None else self.factor)
        return self._draw(self.seed, batch_index, self.factor)
