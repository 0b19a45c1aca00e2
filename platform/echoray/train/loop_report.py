"""What the worker loop (train/loop.py) tells the run's collector: heartbeats between
evaluations, the audit rows, the counts summed over all ranks, and the records of an
evaluation and of the end of an attempt (records.py), built from the loop's state."""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import torch

from echoray.epochs import epochs_of
from echoray.records import EpochRecord, FinalRecord, Heartbeat
from echoray.recovery.faults import RunAborted

HEARTBEAT_S = 0.5


class LoopReport:
    def __init__(self, loop: Any):
        """`loop`: the train/loop.py WorkerLoop that owns this part (not imported: no cycle)."""
        self.loop = loop
        self.last_beat = 0.0
        self.beat_every = HEARTBEAT_S

    def heartbeat(self) -> None:
        """Progress to the collector every HEARTBEAT_S, without waiting for its reply."""
        lp = self.loop
        c = lp.state.counters
        now = time.perf_counter()
        if c.steps == 1 or now - self.last_beat >= self.beat_every:
            if lp.env.link.beat(Heartbeat(lp.rank, c.steps, c.samples, c.step_s, c.fresh, c.wait_s)):
                raise RunAborted("the driver stopped this run")
            self.last_beat = now

    def record_audit(self, rows: dict[str, np.ndarray], aug_key, rep: int, reps: int) -> None:
        lp = self.loop
        if not lp.audit.enabled:  # building the rows costs views per step: only when asked
            return
        lp.audit.add(
            epoch=rows["epoch"], step=lp.state.counters.steps - 1, worker=lp.rank, group=lp.group,
            sample_id=rows["sample_id"], view=rows["echo_copy"] if reps == 1 else rep,
            ba_view=rows["ba_view"], aug_key=aug_key,
        )

    def send_audit(self) -> None:
        rows = self.loop.audit.drain()
        if rows is not None:
            self.loop.env.link.send("add_audit", rows)

    def global_counts(self) -> tuple[int, int, int, int, int, int]:
        """(fresh, trained, trained samples, duplicate batches, batches, extra copies) over all
        ranks; fresh made exact first."""
        lp = self.loop
        s = lp.state
        if lp.world > 1:
            s.counters.fresh += s.fresh.reconcile(lp.rank, lp.env.comm.gather, keep=lp.reads)
        return tuple(lp.env.comm.all_reduce_ints(
            [s.counters.fresh, s.counters.trained, s.counters.samples, s.dup_batches, s.batches, s.counters.extra]))

    def evaluation_record(self, scores: dict[str, float], tta: float | None, counts: tuple) -> EpochRecord:
        """The record of the evaluation just made (LoopState.evals), with global_counts()."""
        lp = self.loop
        s, c = lp.state, lp.state.counters
        fresh_all, trained_all, samples_all, dups, nb, _ = counts
        return EpochRecord(
            eval_index=s.evals, data_epochs=epochs_of(fresh_all, lp.n_train), step=c.steps, scores=scores,
            metric=scores[lp.metric.name], loss=lp.loss.take_mean(), lr=lp.opt.param_groups[0]["lr"],
            accuracy_tta=tta, fresh_examples=fresh_all, trained_examples=trained_all, trained_samples=samples_all,
            duplicate_batch_fraction=dups / max(nb, 1), elapsed_s=time.time() - lp.t_start, time=time.time(),
            train_s=lp.train_s(), wait_fraction=c.wait_s / max(c.wait_s + c.step_s, 1e-9),
            fresh_tokens=fresh_all * lp.cfg.source.seq_len if lp.text else None)  # predicted tokens

    def final_record(self, counts: tuple, loop_s: float) -> FinalRecord:
        """Rank 0's record of the attempt, with global_counts() at its end."""
        lp = self.loop
        s, c = lp.state, lp.state.counters
        fresh_all, trained_all, samples_all, dups, nb, extra_all = counts
        accuracy = lp.metric.name == "accuracy"
        return FinalRecord(
            evals=s.evals, epochs=epochs_of(fresh_all, lp.n_train), steps=c.steps,
            fresh_examples=fresh_all, trained_examples=trained_all, trained_samples=samples_all,
            best_accuracy=s.best if accuracy else None, last_accuracy=s.acc if accuracy else None,
            best_metric=s.best, last_metric=s.acc, to_target=s.to_target, stop_reason=s.reason,
            world_size=lp.world, wait_s=c.wait_s, step_s=c.step_s, device=str(lp.device),
            duplicate_batch_fraction=dups / max(nb, 1), loop_s=loop_s, eval_s=s.eval_s,
            precision=lp.precision.name, extra_copies=extra_all,
            peak_device_bytes=torch.cuda.max_memory_allocated(lp.device) if lp.device.type == "cuda" else None)
