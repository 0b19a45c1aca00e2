"""The per-worker training loop that Ray Train runs (via train/entry.py).

One pass over the run's single multi-epoch stream (`train.max_epochs` epochs of
reads; the run ends when it is consumed). An "epoch" on the worker is a
fixed number of optimizer steps (the same on every worker, so DDP stays in
lockstep), or, with `echo.factor: auto`, the point where the global count of
fresh examples passes another training split; then all workers evaluate,
all-reduce and decide together whether the target or the budget is reached.
"""

from __future__ import annotations

import math
import time
import warnings
from dataclasses import asdict

import numpy as np
import ray.train
import ray.train.torch
import torch
import torch.distributed as dist

from echoray.config import PipelineConfig
from echoray.data.augment import output_size
from echoray.data.echo import batch_repeats
from echoray.data.replay import ConsumedLog
from echoray.seeds import STREAM_MODEL, STREAM_SAMPLER, derive_seed
from echoray.train import checkpoint
from echoray.train.accounting import AuditBuffer, Counters
from echoray.train.batch_augment import (
    backward_views,
    dropout_seed,
    step_counts,
    view_indices,
    worker_views,
)
from echoray.train.batching import pack_unique
from echoray.train.evaluate import EvalSet, Normalizer, all_reduce_ints
from echoray.train.faults import Checkpointer, RunAborted, restore_loop
from echoray.train.ghost_bn import use_ghost_batch_norm
from echoray.train.groups import broadcast_batches, make_groups, rank_layout, steps_per_epoch
from echoray.train.models import build_model
from echoray.train.optim import build_optimizer, lr_multiplier, set_lr

HEARTBEAT_S = 0.5


def shuffle_buffer_rows(cfg: PipelineConfig) -> int | None:
    """The local shuffle buffer, at least two batches: with a buffer of exactly one batch,
    Ray Data 2.60 emitted short batches despite drop_last (414 of 512 rows, measured)."""
    if not cfg.echo.shuffle_buffer:
        return None
    return max(cfg.echo.shuffle_buffer, 2 * cfg.train.batch_size)


def has_duplicates(batch: dict[str, np.ndarray]) -> bool:
    """Two copies of one (epoch, sample) in one batch: what the shuffle buffer should prevent."""
    pairs = batch["epoch"].astype(np.int64) * (1 << 40) + batch["sample_id"].astype(np.int64)
    return len(np.unique(pairs)) < len(pairs)


class Repeats:
    """How often batch echoing repeats each batch; identical on every worker."""

    def __init__(self, cfg: PipelineConfig, collector, rank: int, world: int):
        self.enabled = cfg.echo.stage == "batch"
        self.auto = cfg.echo.factor == "auto"
        self.factor = 1.0 if self.auto else cfg.echo.factor
        self.seed, self.collector, self.rank, self.world = cfg.seed, collector, rank, world

    def __call__(self, batch_index: int) -> int:
        if not self.enabled:
            return 1
        if self.auto:  # rank 0 reads the live factor; everyone uses its draw
            if self.rank == 0:
                self.factor = ray.get(self.collector.echo_factor.remote())
            n = batch_repeats(self.seed, batch_index, self.factor)
            if self.world > 1:
                t = torch.tensor([n], dtype=torch.int64, device=_dist_device())
                dist.broadcast(t, src=0)
                n = int(t.item())
            return n
        return batch_repeats(self.seed, batch_index, self.factor)


def _dist_device():
    return torch.device("cuda", torch.cuda.current_device()) if dist.get_backend() == "nccl" else "cpu"


def run_worker(config: dict) -> None:
    # Ray Data hands out read-only arrays; the step only reads them (float() copies).
    warnings.filterwarnings("ignore", message="The given NumPy array is not writable")
    checkpoint.quiet_report_log()
    cfg = PipelineConfig.model_validate(config["cfg"])
    idx, collector = config["index"], config["collector"]
    if ray.get(collector.is_aborted.remote()):
        return  # a worker group restarted after the driver gave up: end the fit at once
    ctx = ray.train.get_context()
    rank, world = ctx.get_world_rank(), ctx.get_world_size()
    t_start = time.time()

    torch.manual_seed(derive_seed(cfg.seed, STREAM_MODEL))
    device = ray.train.torch.get_device()
    net = build_model(cfg.model, idx.channels, idx.num_classes)
    if cfg.model.ghost_batch_size:
        net = use_ghost_batch_norm(net, cfg.model.ghost_batch_size)
    model = ray.train.torch.prepare_model(net)
    torch.manual_seed(dropout_seed(cfg.seed, rank))  # init above is shared; dropout differs per rank
    opt = build_optimizer(model.parameters(), cfg.optimizer)
    normalize = Normalizer(cfg.preprocess.mean, cfg.preprocess.std, idx.channels, device)
    ba = cfg.batch_augmentation
    eval_set = EvalSet(idx, rank, world, output_size(idx.image_size, cfg.preprocess.augment.ops),
                       tta=(cfg.seed, ba.tta_views, cfg.preprocess.augment.ops) if ba.tta_views else None)
    on_worker = cfg.preprocess.augment.on == "worker"
    ops = cfg.preprocess.augment.ops if on_worker else []
    copies = ba.copies
    views_on_worker = on_worker or copies > 1
    layout = rank_layout(rank, world, copies, ba.mode)
    views = view_indices(copies, ba.mode, layout.member)  # grouped: one view per member

    n_train = len(idx.train_ids)
    spe = steps_per_epoch(cfg.echo.stage, cfg.echo.factor, cfg.train.batch_size, n_train, layout.readers)
    by_fresh = cfg.echo.factor == "auto" and cfg.echo.stage != "batch"
    repeats = Repeats(cfg, collector, rank, world)
    counters, audit = Counters(), AuditBuffer(cfg.audit.enabled)
    state = {"epoch": 0, "best": 0.0, "acc": float("nan"), "to_target": None, "reason": "max_epochs of data consumed",
             "loss_sum": 0.0, "loss_n": 0, "dup_batches": 0, "batches": 0, "eval_step": 0,
             "eval_s": 0.0, "batch_index": 0, "train_s": 0.0}
    history: list[dict] = []  # rank 0's epoch records, kept in checkpoints for a resumed driver
    restored = restore_loop(ray.train.get_checkpoint(), collector, rank, world, model, opt, counters, state,
                            history)
    t_start -= restored.meta["state"]["elapsed_s"] if restored else 0.0  # elapsed time continues
    pending = restored.pending if restored else None
    consumed = ConsumedLog(restored.consumed if restored else None)
    checkpointer = Checkpointer(cfg, idx, collector, rank, world, consumed,
                                restored.meta["start_epoch"] if restored else 0)
    grouped = ba.mode == "grouped"
    group, reads = layout.group, layout.reads  # in a group only the first worker reads
    shard = ray.train.get_dataset_shard("train")
    batches = None
    if reads:
        batches = shard.iter_batches(
            batch_size=cfg.train.batch_size, batch_format="numpy", drop_last=True,
            local_shuffle_buffer_size=shuffle_buffer_rows(cfg),
            local_shuffle_seed=derive_seed(cfg.seed, STREAM_SAMPLER, group), prefetch_batches=2,
        )
    last_beat = 0.0

    def train_s() -> float:  # time since the first batch arrived, over all attempts
        return state["train_s"] + (time.perf_counter() - t_first if t_first is not None else 0.0)

    def evaluate_and_decide() -> bool:
        state["epoch"] += 1
        state["eval_step"] = counters.steps
        t_eval = time.perf_counter()
        correct, total, tta_correct = eval_set.evaluate(model, normalize, cfg.train.batch_size)
        state["eval_s"] += time.perf_counter() - t_eval
        fresh_all, trained_all, samples_all, dups, nb = all_reduce_ints(
            [counters.fresh, counters.trained, counters.samples, state["dup_batches"], state["batches"]])
        acc = correct / total
        state["acc"], state["best"] = acc, max(state["best"], acc)
        record = {
            "epoch": state["epoch"], "step": counters.steps, "accuracy": acc,
            "loss": state["loss_sum"] / max(state["loss_n"], 1), "lr": opt.param_groups[0]["lr"],
            "accuracy_tta": tta_correct / total if ba.tta_views else None,
            "fresh_examples": fresh_all, "trained_examples": trained_all, "trained_samples": samples_all,
            "duplicate_batch_fraction": dups / max(nb, 1),
            "elapsed_s": time.time() - t_start, "time": time.time(),
            "train_s": train_s(),
            "wait_fraction": counters.wait_s / max(counters.wait_s + counters.step_s, 1e-9),
        }
        state["loss_sum"], state["loss_n"] = 0.0, 0
        if not math.isfinite(record["loss"]):  # NaN weights: every later epoch would be wasted
            raise FloatingPointError(f"training diverged: mean loss {record['loss']} in epoch {state['epoch']} "
                                     f"(optimizer.lr={cfg.optimizer.lr}); lower optimizer.lr")
        stop = True
        if cfg.train.target is not None and acc >= cfg.train.target:
            state["to_target"], state["reason"] = record, "target reached"
        elif cfg.train.max_fresh_examples and fresh_all >= cfg.train.max_fresh_examples:
            state["reason"] = "max_fresh_examples reached"
        else:
            stop = False
        if rank == 0:
            history.append(record)
            collector.event.remote(record)
        _send_audit(collector, audit)
        return stop

    def save_checkpoint(pending_batch: tuple | None) -> None:
        keep = ("epoch", "best", "acc", "to_target", "reason", "eval_step", "eval_s")
        checkpointer.save(
            model=model, opt=opt, epoch=state["epoch"], steps=counters.steps, history=history,
            loop_state={**{k: state[k] for k in keep}, "elapsed_s": time.time() - t_start, "train_s": train_s()},
            rank_state={"counters": asdict(counters), "dup_batches": state["dup_batches"],
                        "batches": state["batches"], "batch_index": state["batch_index"],
                        "next_rep": pending_batch[1] if pending_batch else 0,
                        "reps": pending_batch[2] if pending_batch else 0},
            pending=pending_batch[0] if pending_batch else None, audit=audit.take_for_checkpoint())

    def epoch_due() -> bool:
        if not by_fresh:
            return counters.steps % spe == 0
        (fresh_all,) = all_reduce_ints([counters.fresh])
        return fresh_all >= (state["epoch"] + 1) * n_train

    if reads:  # exact batch sizes keep workers in step; separate echoed copies if asked
        separate = cfg.echo.separate_copies and cfg.echo.stage in ("before_augment", "after_augment")
        batches = pack_unique(batches, cfg.train.batch_size, max_carry=None if separate else 0)
    if grouped:
        pg = make_groups(world, copies)[group]
        shape = (idx.image_size, idx.image_size, idx.channels)
        batches = broadcast_batches(batches, pg, layout.leader, shape, cfg.train.batch_size)

    def work():  # (batch, first repeat, repeats or None): a batch cut short by a checkpoint first
        if pending is not None:
            yield pending, restored.rank["next_rep"], restored.rank["reps"]
        for b in batches:
            yield b, 0, None

    model.train()
    stop = False
    t_wait = time.perf_counter()
    t_first = None
    for batch, first_rep, reps in work():
        waited = time.perf_counter() - t_wait
        if t_first is None:
            t_first, waited = time.perf_counter(), 0.0  # pipeline start-up is not a wait
        if first_rep == 0:
            state["batches"] += 1
            state["dup_batches"] += has_duplicates(batch)
            if reads:
                consumed.add(batch["epoch"], batch["sample_id"], batch["echo_copy"])
        images = torch.from_numpy(batch["image"])
        labels = torch.as_tensor(np.array(batch["label"]), device=device)
        images, labels, aug_key, rows = worker_views(  # view-major rows (local M views; grouped: one)
            cfg.seed, batch, images.to(device, non_blocking=True), labels,
            per_copy=cfg.echo.stage == "before_augment", views=views, ops=ops, on_worker=views_on_worker)
        if reps is None:
            reps = repeats(state["batch_index"])
            state["batch_index"] += 1
        for rep in range(first_rep, reps):
            t0 = time.perf_counter()
            set_lr(opt, cfg.optimizer.lr, lr_multiplier(counters.steps / spe, cfg.train.max_epochs, cfg.schedule))
            opt.zero_grad(set_to_none=True)
            loss_value = backward_views(model, normalize(images), labels, len(views), ba.accumulate)
            opt.step()
            state["loss_sum"] += loss_value
            state["loss_n"] += 1
            fresh, trained, samples = step_counts(batch, len(views), reads, rep == 0)
            counters.add_step(fresh, trained, waited if rep == first_rep else 0.0, time.perf_counter() - t0,
                              samples=samples)
            if audit.enabled:
                audit.add(
                    epoch=rows["epoch"], step=counters.steps - 1, worker=rank, group=group,
                    sample_id=rows["sample_id"], view=rows["echo_copy"] if reps == 1 else rep,
                    ba_view=rows["ba_view"], aug_key=aug_key,
                )
            now = time.perf_counter()
            if counters.steps == 1 or now - last_beat >= HEARTBEAT_S:
                if ray.get(collector.heartbeat.remote(rank, counters.steps, counters.samples, counters.step_s)):
                    raise RunAborted("the driver stopped this run")
                last_beat = now
            if epoch_due():
                if evaluate_and_decide():
                    stop = True
                    break
                if checkpointer.due(state["epoch"]):
                    save_checkpoint((batch, rep + 1, reps) if rep + 1 < reps else None)
        if stop:
            break
        t_wait = time.perf_counter()
    if not stop and counters.steps > state["eval_step"]:
        evaluate_and_decide()  # the stream ended inside an epoch: score what was trained

    loop_s = train_s()
    fresh_all, trained_all, samples_all, dups, nb = all_reduce_ints(
        [counters.fresh, counters.trained, counters.samples, state["dup_batches"], state["batches"]])
    collector.heartbeat.remote(rank, counters.steps, counters.samples, counters.step_s)
    _send_audit(collector, audit)
    if rank == 0:
        collector.finish.remote({
            "epochs": state["epoch"], "steps": counters.steps, "fresh_examples": fresh_all,
            "trained_examples": trained_all, "trained_samples": samples_all,
            "best_accuracy": state["best"], "last_accuracy": state["acc"],
            "to_target": state["to_target"], "stop_reason": state["reason"], "world_size": world,
            "wait_s": counters.wait_s, "step_s": counters.step_s, "device": str(device),
            "duplicate_batch_fraction": dups / max(nb, 1), "loop_s": loop_s,
            "eval_s": state["eval_s"],
        })
    ray.get(collector.sync.remote())


def _send_audit(collector, audit: AuditBuffer) -> None:
    rows = audit.drain()
    if rows is not None:
        collector.add_audit.remote(rows)
