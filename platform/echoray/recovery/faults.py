"""The worker's side of fault tolerance: periodic checkpoints with exact counters, and
errors that no retry can fix reported as such.

At a checkpoint every rank adds up, over all ranks, how many rows of each plan epoch
their steps consumed; rank 0 finds the first epoch not wholly consumed (accounting/consumed.py)
and every rank saves the keys it consumed from that epoch on. A restarted worker group
reads the stream again from that epoch without those rows (data/pipeline.py), so no
example is counted twice or lost.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy as np
import ray

from echoray.accounting.consumed import ConsumedLog, expected_rows, first_open_epoch
from echoray.config import PipelineConfig
from echoray.data.sources import SourceError, SourceIndex
from echoray.records import CheckpointMeta, EpochRecord
from echoray.recovery import checkpoint
from echoray.train.evaluate import all_reduce_ints

# Errors that would fail again on every retry: stop the run instead of restarting workers.
DETERMINISTIC = (SourceError, FloatingPointError)


class RunAborted(RuntimeError):
    """The driver stopped the run (see RunCollector.abort)."""


def report_fatal(collector, exc: BaseException) -> None:
    """Tell the driver about a deterministic error (in the exception or its causes)."""
    seen = exc
    while seen is not None:
        if isinstance(seen, DETERMINISTIC):
            ray.get(collector.fatal.remote(str(seen), "data" if isinstance(seen, SourceError) else "diverged"))
            return
        seen = seen.__cause__ or seen.__context__


class Checkpointer:
    def __init__(self, cfg: PipelineConfig, idx: SourceIndex, collector, rank: int, world: int,
                 consumed: ConsumedLog, first_open_pass: int = 0, sink: Callable[[dict, Any], None] | None = None):
        """`sink(metrics, local_dir)` keeps a written checkpoint: Ray Train's report by
        default; a local-mode run passes its CheckpointStore's (train/local_fit.py)."""
        self.cfg, self.idx, self.collector = cfg, idx, collector
        self.sink = sink or checkpoint.report
        self.rank, self.world, self.consumed = rank, world, consumed
        self.first_open_pass = first_open_pass  # read-plan passes before it are complete (keys dropped)
        # checkpoint_every counts epochs of fresh data; `evals` below counts evaluations
        self.every = cfg.train.checkpoint_every * cfg.train.evals_per_epoch
        self._expected: dict[int, int | None] = {}
        self._bad_seen = -1

    def due(self, evals: int) -> bool:
        """Every `checkpoint_every` epochs (the same on every rank: a count, not a clock)."""
        return self.every > 0 and evals % self.every == 0

    def _first_open_pass(self) -> int:
        """The first read-plan pass that all ranks together have not wholly consumed."""
        n = self.cfg.train.max_epochs
        rows, fresh = self.consumed.counts(n)
        total = np.asarray(all_reduce_ints([*rows, *fresh]), dtype=np.int64)
        start = 0
        if self.rank == 0:
            bad = ray.get(self.collector.bad_ids.remote())
            if len(bad) != self._bad_seen:  # the readable ids changed: recount
                self._expected, self._bad_seen = {}, len(bad)
            good = np.setdiff1d(self.idx.train_ids, bad) if len(bad) else self.idx.train_ids
            e = self.cfg.echo

            def expected(epoch: int) -> int | None:
                if epoch not in self._expected:
                    self._expected[epoch] = expected_rows(self.cfg.seed, epoch, good, e.stage, e.factor)
                return self._expected[epoch]

            start = first_open_epoch(total[:n], total[n:], expected, len(good), done_before=self.first_open_pass)
        self.first_open_pass = all_reduce_ints([start])[0]  # rank 0's decision, the same on every rank
        return self.first_open_pass

    def save(self, *, model, opt, evals: int, steps: int, loop_state: dict[str, Any], history: list[EpochRecord],
             rank_state: dict[str, Any], pending: dict[str, np.ndarray] | None,
             audit: dict[str, np.ndarray] | None = None) -> None:
        start = self._first_open_pass()
        keys = self.consumed.keep_from(start)
        meta = None
        if self.rank == 0:
            meta = CheckpointMeta(evals=evals, steps=steps, first_open_pass=start, world_size=self.world,
                                  state=loop_state, history=list(history), saved_at=time.time(),
                                  echo_factor=ray.get(self.collector.echo_factor.remote()))
        local = checkpoint.write(self.rank, model, opt, meta, rank_state, keys, pending, audit)
        self.sink({"epoch": evals, "steps": steps, "start_epoch": start}, local)


def restore_loop(ckpt, link, rank: int, world: int, model, opt, readers: list[bool] | None = None):
    """Load the checkpoint Ray Train handed this worker group into model and optimizer
    (None: start from scratch); the loop state is read from it by WorkerLoop.restore.

    Rank 0 tells the collector, which drops what an earlier attempt reported after the
    checkpoint and answers which checkpoint the training stream was built for. `readers`:
    which ranks read the stream (train/groups.py reading_ranks), for a checkpoint written
    by another number of workers (recovery/reshard.py)."""
    if ckpt is None:
        if rank == 0:  # a first start, or a restart before any checkpoint: from scratch
            link.ask("attempt_started", 0, 0)
        return None
    r = checkpoint.restore(ckpt, rank, world, model, opt, readers)
    if rank == 0:
        origin = link.ask("attempt_started", r.meta.evals, r.meta.steps)
        if origin != ckpt.path:
            raise RuntimeError(f"the training stream was built for checkpoint {origin}, "
                               f"but Ray Train restored {ckpt.path}")
    return r
