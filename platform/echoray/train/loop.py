"""The per-worker training loop as a recipe (in the manner of torchtune's recipes):
`WorkerLoop.setup / restore / train / step / evaluate / save_checkpoint / finish`, its
counters in one LoopState (accounting/loop_state.py); two collaborators read them: the input
side (train/loop_input.py LoopInput: batches, the prefetch, the inputs) and what goes to
the collector (train/loop_report.py LoopReport: heartbeats, audit, counts, records).
`run_worker` (worker/ray_worker.py) is the thin Ray adapter that Ray Train runs (via
worker/entry.py); the loop itself takes its collector link, collectives and input batches
as arguments, so it also runs without Ray.

One pass over the run's single multi-epoch stream (`train.max_epochs` epochs of
reads; the run ends when it is consumed). An epoch is a pass over the training set's
fresh examples (echoray/epochs.py), whatever the echo factor, `auto` included:
`train.evals_per_epoch: k` puts k evaluations into every epoch, at every n_train/k
fresh examples counted over all workers (worker/link.py FreshClock), at the same
step on every worker (DDP stays in lockstep); there all workers evaluate, all-reduce and
decide together whether the target or the budget is reached. The last evaluation is the
stream's end, after the echo copies and repeats that follow the last fresh example. A
record's `epoch` key numbers the evaluation; its `data_epochs` are the epochs (fresh
examples / n_train) it fell at. Under `echo.factor: auto` (example echo) the reading
worker echoes the rows as it takes them from the stream (train/consumption_echo.py), so
the live factor is the one trained.
"""

from __future__ import annotations

import math
import time
import warnings
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

import numpy as np
import torch

from echoray.accounting.consumed import ConsumedLog
from echoray.accounting.counters import AuditBuffer
from echoray.accounting.loop_state import LoopState
from echoray.config import PipelineConfig
from echoray.data.augment import output_size
from echoray.echo_plan import EchoPlan
from echoray.epochs import evaluation_point
from echoray.metrics import metric_named
from echoray.records import EpochRecord, FinalRecord, Heartbeat, PendingBatch
from echoray.recovery.faults import RunAborted
from echoray.seeds import STREAM_MODEL, derive_seed
from echoray.train.batch_augment import (
    backward_views,
    dropout_seed,
    step_counts,
    view_indices,
)
from echoray.train.consumption_echo import BatchEchoDraws
from echoray.train.device import LossMeter, Precision, ToDevice, memory_format
from echoray.train.evaluate import Normalizer
from echoray.train.ghost_bn import use_ghost_batch_norm
from echoray.train.groups import rank_layout
from echoray.train.loop_input import LoopInput
from echoray.train.loop_report import LoopReport
from echoray.train.models import build_model
from echoray.train.optim import build_optimizer, lr_multiplier, set_lr
from echoray.train.prefetch import Prefetch
from echoray.train.schedule_position import at_evaluation, rebase, schedule_epochs
from echoray.worker.link import Collectives, FreshClock
from echoray.worker.ports import CheckpointPort, CollectorPort, EvaluatorPort


def steps_per_data_epoch(cfg: PipelineConfig, num_train: int, world: int) -> int:
    """Optimizer steps per epoch (a pass of fresh data) at the echo plan's schedule factor,
    of a run of `world` workers (train/groups.py: a grouped run's W/M groups read disjoint
    shards; a group's members step together): the learning-rate schedule's unit."""
    ba = cfg.batch_augmentation
    readers = rank_layout(0, world, ba.copies, ba.mode).readers
    return EchoPlan.from_config(cfg).steps_per_shard_epoch(cfg.train.batch_size, num_train, readers)


def check_evals_per_epoch(cfg: PipelineConfig, n_train: int, world: int) -> None:
    """train.evals_per_epoch can have at most one evaluation per optimizer step of an
    epoch at e = 1 (the fewest steps a fresh epoch can take: n_train/k fresh examples
    between evaluations is then at least one step's); ValueError naming the key."""
    k = cfg.train.evals_per_epoch
    ba = cfg.batch_augmentation
    readers = rank_layout(0, world, ba.copies, ba.mode).readers
    spe = EchoPlan.from_config(cfg).steps_per_shard_epoch(cfg.train.batch_size, n_train, readers, factor=1.0)
    if k > spe:
        raise ValueError(
            f"train.evals_per_epoch={k} is more than the {spe} optimizer step(s) of one epoch "
            f"({n_train} training examples, train.batch_size={cfg.train.batch_size}, "
            f"{world} worker(s)); use at most {spe}")


def held_out_scores(scored, tta_views: int) -> tuple[dict[str, float], float | None]:
    """An evaluator's result as ({metric name: value}, test-time-augmentation accuracy): a
    language model's dict (train/lm_eval.py) as it is, an image one's (correct, total,
    tta_correct) as accuracy."""
    if isinstance(scored, dict):
        return dict(scored), None
    correct, total, tta_correct = scored
    return {"accuracy": correct / total}, (tta_correct / total if tta_views else None)


@dataclass
class WorkerEnv:
    """What the loop needs from its surroundings: Ray supplies it in run_worker; tests and
    benchmarks supply a LocalLink, Collectives.single() and an in-memory iterator."""

    rank: int
    world: int
    device: torch.device
    link: CollectorPort  # CollectorLink or LocalLink (worker/link.py)
    comm: Collectives
    wrap_model: Callable[[torch.nn.Module], torch.nn.Module]  # DDP + device (ray.train.torch.prepare_model)
    evaluator: EvaluatorPort  # train/evaluate.py EvalSet, train/lm_eval.py TextEvalSet
    checkpointer: CheckpointPort | None = None  # recovery/faults.py Checkpointer; None: no checkpoints
    should_stop: Callable[[], bool] | None = None  # checked before every step (driver/stop.py)


class WorkerLoop:
    """The recipe and its one state: the counters in `state` (accounting/loop_state.py), the
    model, optimizer and the consumed log here; the input side (`input`,
    train/loop_input.py) and what goes to the collector (`report`, train/loop_report.py)
    are collaborators that read them."""

    def __init__(self, cfg: PipelineConfig, env: WorkerEnv, *, n_train: int, channels: int, num_classes: int,
                 image_size: int | None = None):
        self.cfg, self.env = cfg, env
        self.image_size = image_size  # of the images in a batch (grouped mode broadcasts them)
        self.rank, self.world, self.device = env.rank, env.world, torch.device(env.device)
        self.n_train, self.channels, self.num_classes = n_train, channels, num_classes
        self.metric = metric_named(cfg.train.metric)
        self.text = cfg.model.name == "transformer_lm"  # samples are token rows (train/lm.py), not images
        ba = cfg.batch_augmentation
        self.copies = ba.copies
        self.grouped = ba.mode == "grouped"
        self.layout = rank_layout(self.rank, self.world, self.copies, ba.mode)
        self.group, self.member = self.layout.group, self.layout.member
        self.reads = self.layout.reads  # in a group only the first worker reads
        self.views = view_indices(self.copies, ba.mode, self.member)  # grouped: one view per member
        on_worker = cfg.preprocess.augment.on == "worker"
        self.ops = cfg.preprocess.augment.ops if on_worker else []
        self.views_on_worker = on_worker or self.copies > 1
        self.spe = steps_per_data_epoch(cfg, n_train, self.world)
        check_evals_per_epoch(cfg, n_train, self.world)
        self.state = LoopState()
        self.history: list[EpochRecord] = []  # rank 0's, kept in checkpoints for a resumed driver
        self.audit = AuditBuffer(cfg.audit.enabled)
        self.consumed = ConsumedLog()
        self.pending: PendingBatch | None = None  # a batch whose repeats a checkpoint cut short
        self.lookahead = 1  # batches pulled and made into inputs ahead of the step (LoopInput.prepared); 0: none
        # echo.factor: auto decided as rows are taken from the stream (train/consumption_echo.py)
        self.plan = EchoPlan.from_config(cfg)
        self.worker_echo = self.plan.at_consumption
        self.restored_pool: dict[str, np.ndarray] | None = None
        self.loss = LossMeter()
        self.t_start = time.time()
        self.t_first: float | None = None
        self.input = LoopInput(self)
        self.report = LoopReport(self)

    # --- setup and restore ---
    def setup(self) -> None:
        # Ray Data hands out read-only arrays; the step only reads them (float() copies).
        warnings.filterwarnings("ignore", message="The given NumPy array is not writable")
        cfg, t = self.cfg, self.cfg.train
        torch.manual_seed(derive_seed(cfg.seed, STREAM_MODEL))
        side = output_size(self.image_size, cfg.preprocess.augment.ops) if self.image_size else None
        net = build_model(cfg.model, self.channels, self.num_classes, side, context=cfg.source.seq_len)
        if cfg.model.ghost_batch_size:
            net = use_ghost_batch_norm(net, cfg.model.ghost_batch_size)
        self.fmt = memory_format(t.channels_last)
        net = net.to(memory_format=self.fmt)
        if t.compile:
            net = torch.compile(net)
        self.model = self.env.wrap_model(net)
        torch.manual_seed(dropout_seed(cfg.seed, self.rank))  # init above is shared; dropout differs per rank
        self.opt = build_optimizer(self.model.parameters(), cfg.optimizer)
        self.precision = Precision(t.precision, self.device)
        self.normalize = Normalizer(cfg.preprocess.mean, cfg.preprocess.std, self.channels, self.device,
                                    memory_format=self.fmt)
        self.to_device = ToDevice(self.device)
        self.repeats = BatchEchoDraws(cfg.seed, cfg.echo.factor, self.rank, self.env.link,
                                      self.env.comm.broadcast_float) if self.plan.on_batches else None
        self.clock = FreshClock(self.n_train, self.layout.readers * t.batch_size, self.env.comm.all_reduce_ints,
                                per_epoch=t.evals_per_epoch, last=t.max_epochs * t.evals_per_epoch)

    def restore(self, restored) -> None:
        """Continue from a checkpoint (recovery/checkpoint.py Restored; model and optimizer
        are already loaded); None: from the start."""
        if restored is None:
            return
        self.state = LoopState.from_checkpoint(restored.meta.state, restored.rank)
        if restored.meta.world_size != self.world:  # elastic resume or resized group: the schedule goes on from here
            s, before = self.state, steps_per_data_epoch(self.cfg, self.n_train, restored.meta.world_size)
            s.lr_from = rebase(s.counters.steps, s.lr_from, before, self.spe, self.schedule_cap())
        self.precision.load_state_dict(self.state.amp_scaler)
        self.history[:] = restored.meta.history
        self.t_start = time.time() - self.state.elapsed_s  # elapsed time continues
        self.consumed = ConsumedLog(restored.consumed)
        if restored.pending is not None and self.worker_echo:
            self.restored_pool = restored.pending  # echoed rows the checkpoint had not trained
        elif restored.pending is not None:
            self.pending = PendingBatch(restored.pending, self.state.next_rep, self.state.reps)

    def input_batches(self, source: Iterable[dict] | None) -> Iterator[dict[str, np.ndarray]]:
        """The batches the loop trains on (LoopInput.batches)."""
        return self.input.batches(source)

    def overlaps_input(self) -> bool:
        """Whether the input path runs on a thread ahead of the step (LoopInput.overlaps)."""
        return self.input.overlaps()

    # --- training ---
    def train_s(self) -> float:
        """Time since the first batch arrived, over all attempts."""
        return self.state.train_s + (time.perf_counter() - self.t_first if self.t_first is not None else 0.0)

    def train(self, batches: Iterable[dict]) -> bool:
        """Every step of the stream; True when the target or the budget stopped the run."""
        self.model.train()
        t_wait = time.perf_counter()
        with self.input.prepared(batches) as work:
            return self._train_on(work, t_wait)

    def _train_on(self, work: Prefetch, t_wait: float) -> bool:
        s = self.state
        for (batch, first_rep, reps), (inputs, labels, aug_key, rows) in work:
            waited = time.perf_counter() - t_wait
            if self.t_first is None:
                self.t_first, waited = time.perf_counter(), 0.0  # pipeline start-up is not a wait
            if first_rep == 0:
                self.input.record_batch(batch)
            if reps is None:
                reps = self.repeats(s.batch_index) if self.repeats is not None else 1
                s.batch_index += 1
            for rep in range(first_rep, reps):
                if self.env.should_stop is not None and self.env.should_stop():
                    raise RunAborted("stopped at a step boundary (SIGTERM, Ctrl-C or the driver gave up)")
                t0 = time.perf_counter()
                self.step(inputs, labels)
                fresh = s.fresh.observe(batch["epoch"], batch["sample_id"], batch["echo_copies"]) \
                    if (rep == 0 and self.reads) else 0
                trained, samples = step_counts(len(batch["sample_id"]), len(self.views), self.reads)
                s.counters.add_step(fresh, trained, waited if rep == first_rep else 0.0,
                                    time.perf_counter() - t0, samples=samples)
                if self.plan.fills_waits and rep == 0 and self.reads:
                    s.counters.extra += int((batch["echo_copies"] == 0).sum())
                self.report.record_audit(rows, aug_key, rep, reps)
                self.report.heartbeat()
                # batch echo: after the batch's last repeat (every rank draws the same repeats)
                if rep == reps - 1 and self.clock.due(s.counters.steps, s.evals, s.counters.fresh):
                    if self.evaluate():
                        return True
                    if self.env.checkpointer is not None and self.env.checkpointer.due(s.evals):
                        self.save_checkpoint(PendingBatch(batch, rep + 1, reps) if rep + 1 < reps else None)
            t_wait = time.perf_counter()
        return False

    def step(self, inputs: torch.Tensor, labels: torch.Tensor) -> None:
        """One optimizer step; the loss stays on the device (read at the next evaluation)."""
        cfg = self.cfg
        position = schedule_epochs(self.state.counters.steps, self.state.lr_from, self.spe, self.schedule_cap())
        set_lr(self.opt, cfg.optimizer.lr, lr_multiplier(position, cfg.train.max_epochs, cfg.schedule))
        self.opt.zero_grad(set_to_none=True)
        with self.precision.autocast():
            loss = backward_views(self.model, inputs, labels, len(self.views), cfg.batch_augmentation.accumulate,
                                  backward=self.precision.backward, **self.loss_fn())
        self.precision.step(self.opt)
        self.loss.add(loss)

    def schedule_cap(self) -> float:
        """Under `auto`, the next evaluation's point in epochs (train/schedule_position.py): the
        schedule cannot be past it before that evaluation; no cap at a fixed factor."""
        if not self.plan.schedule_follows_fresh:
            return math.inf
        return evaluation_point(self.state.evals + 1, self.n_train, self.cfg.train.evals_per_epoch) / self.n_train

    def loss_fn(self) -> dict:
        if not self.text:
            return {}
        from echoray.train.lm import lm_loss

        return {"loss_fn": lm_loss}

    # --- evaluation, checkpoints, the end ---
    def evaluate(self) -> bool:
        """Score the held-out split, record the evaluation, decide together whether to stop."""
        s, cfg = self.state, self.cfg
        s.evals += 1
        s.eval_step = s.counters.steps
        t_eval = time.perf_counter()
        with self.precision.autocast():
            scored = self.env.evaluator.evaluate(self.model, self.normalize, cfg.train.batch_size)
        s.eval_s += time.perf_counter() - t_eval
        counts = self.report.global_counts()
        if self.plan.schedule_follows_fresh:
            s.lr_from = at_evaluation(s.counters.steps, counts[0], self.n_train, s.lr_from)
        scores, tta = held_out_scores(scored, cfg.batch_augmentation.tta_views)
        value = scores[self.metric.name]
        s.acc, s.best = value, self.metric.better(s.best if s.evals > 1 else self.metric.worst, value)
        record = self.report.evaluation_record(scores, tta, counts)
        if not math.isfinite(record.loss):  # NaN weights: every later evaluation would be wasted
            raise FloatingPointError(f"training diverged: mean loss {record.loss} at evaluation {s.evals} "
                                     f"(epoch {record.data_epochs:.2f}) "
                                     f"(optimizer.lr={cfg.optimizer.lr}); lower optimizer.lr")
        stop = True
        if self.metric.reached(value, cfg.train.target):
            s.to_target, s.reason = record, "target reached"
        elif cfg.train.max_fresh_examples and counts[0] >= cfg.train.max_fresh_examples:
            s.reason = "max_fresh_examples reached"
        else:
            stop = False
        if self.rank == 0:
            self.history.append(record)
            self.env.link.send("event", record.to_dict())
        self.report.send_audit()
        return stop

    def save_checkpoint(self, pending: PendingBatch | None) -> None:
        """Every rank, at the same step: model, optimizer, LoopState, consumed rows, audit."""
        s = self.state
        pool = self.input.untrained_pool()
        run_part, rank_part = s.to_checkpoint(
            elapsed_s=time.time() - self.t_start, train_s=self.train_s(),
            next_rep=pending.next_repeat if pending else 0, reps=pending.repeats if pending else 0,
            amp_scaler=self.precision.state_dict())
        self.env.checkpointer.save(
            model=self.model, opt=self.opt, evals=s.evals, steps=s.counters.steps, history=self.history,
            loop_state=run_part, rank_state=rank_part, pending=pending.batch if pending else pool,
            audit=self.audit.take_for_checkpoint())

    def finish(self, stopped: bool) -> FinalRecord | None:
        """Score what was trained since the last evaluation (the run's last: the stream ended)
        and checkpoint it where due, as any evaluation; send the final counts (rank 0: the
        run's record)."""
        s = self.state
        if not stopped and s.counters.steps > s.eval_step:
            reached = self.evaluate()
            if not reached and self.env.checkpointer is not None and self.env.checkpointer.due(s.evals):
                self.save_checkpoint(None)  # nothing pending: the stream is consumed
        loop_s = self.train_s()
        counts = self.report.global_counts()
        c = s.counters
        self.env.link.send("heartbeat", Heartbeat(self.rank, c.steps, c.samples, c.step_s, c.fresh, c.wait_s))
        self.report.send_audit()
        final = None
        if self.rank == 0:
            final = self.report.final_record(counts, loop_s)
            self.env.link.send("finish", final.to_dict())
        self.env.link.ask("sync")
        return final

    def run(self, source: Iterable[dict] | None, restored=None) -> dict | None:
        """The whole recipe, after setup(): restore, train until stopped or the stream ends,
        finish. Returns rank 0's final record in the form the collector receives (a dict)."""
        self.restore(restored)
        final = self.finish(self.train(self.input_batches(source)))
        return final.to_dict() if final is not None else None
