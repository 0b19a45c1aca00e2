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

import numpy as np
import ray.train
import ray.train.torch
import torch
import torch.distributed as dist
import torch.nn.functional as F

from echoray.config import PipelineConfig
from echoray.data.augment import augment_batch, output_size
from echoray.data.echo import batch_repeats
from echoray.data.stages import augment_keys
from echoray.seeds import STREAM_MODEL, STREAM_SAMPLER, derive_seed, to_int63
from echoray.train.accounting import AuditBuffer, Counters
from echoray.train.batching import pack_unique
from echoray.train.evaluate import EvalSet, Normalizer, all_reduce_ints
from echoray.train.models import build_model
from echoray.train.optim import build_optimizer, lr_multiplier, set_lr

HEARTBEAT_S = 0.5


def steps_per_epoch(cfg: PipelineConfig, num_train: int, world: int) -> int:
    """Optimizer steps per epoch of fresh data, at the nominal echo factor (auto: 1)."""
    factor = cfg.echo.factor if cfg.echo.factor != "auto" else 1.0
    per_step = world * cfg.train.batch_size
    if cfg.echo.stage in ("before_augment", "after_augment"):
        return max(1, math.floor(num_train * factor / per_step))
    fresh_steps = max(1, num_train // per_step)
    return max(1, round(fresh_steps * (factor if cfg.echo.stage == "batch" else 1.0)))


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
    cfg = PipelineConfig.model_validate(config["cfg"])
    idx, collector = config["index"], config["collector"]
    ctx = ray.train.get_context()
    rank, world = ctx.get_world_rank(), ctx.get_world_size()
    t_start = time.time()

    torch.manual_seed(derive_seed(cfg.seed, STREAM_MODEL))
    device = ray.train.torch.get_device()
    model = ray.train.torch.prepare_model(build_model(cfg.model, idx.channels, idx.num_classes))
    opt = build_optimizer(model.parameters(), cfg.optimizer)
    normalize = Normalizer(cfg.preprocess.mean, cfg.preprocess.std, idx.channels, device)
    eval_set = EvalSet(idx, rank, world, output_size(idx.image_size, cfg.preprocess.augment.ops))
    ops_on_worker = cfg.preprocess.augment.ops if cfg.preprocess.augment.on == "worker" else None

    n_train = len(idx.train_ids)
    spe = steps_per_epoch(cfg, n_train, world)
    by_fresh = cfg.echo.factor == "auto" and cfg.echo.stage != "batch"
    repeats = Repeats(cfg, collector, rank, world)
    counters, audit = Counters(), AuditBuffer(cfg.audit.enabled)
    group = rank // cfg.batch_augmentation.copies if cfg.batch_augmentation.mode == "grouped" else rank
    batches = ray.train.get_dataset_shard("train").iter_batches(
        batch_size=cfg.train.batch_size, batch_format="numpy", drop_last=True,
        local_shuffle_buffer_size=cfg.echo.shuffle_buffer or None,
        local_shuffle_seed=derive_seed(cfg.seed, STREAM_SAMPLER, rank), prefetch_batches=2,
    )
    state = {"epoch": 0, "best": 0.0, "acc": float("nan"), "to_target": None, "reason": "max_epochs of data consumed",
             "loss_sum": 0.0, "loss_n": 0, "dup_batches": 0, "batches": 0, "eval_step": 0,
             "eval_s": 0.0}
    last_beat = 0.0

    def evaluate_and_decide() -> bool:
        state["epoch"] += 1
        state["eval_step"] = counters.steps
        t_eval = time.perf_counter()
        correct, total = eval_set.evaluate(model, normalize, cfg.train.batch_size)
        state["eval_s"] += time.perf_counter() - t_eval
        fresh_all, trained_all, dups, nb = all_reduce_ints(
            [counters.fresh, counters.trained, state["dup_batches"], state["batches"]])
        acc = correct / total
        state["acc"], state["best"] = acc, max(state["best"], acc)
        record = {
            "epoch": state["epoch"], "step": counters.steps, "accuracy": acc,
            "loss": state["loss_sum"] / max(state["loss_n"], 1), "lr": opt.param_groups[0]["lr"],
            "fresh_examples": fresh_all, "trained_examples": trained_all,
            "duplicate_batch_fraction": dups / max(nb, 1),
            "elapsed_s": time.time() - t_start, "time": time.time(),
            "train_s": time.perf_counter() - t_first,  # since the first batch arrived
            "wait_fraction": counters.wait_s / max(counters.wait_s + counters.step_s, 1e-9),
        }
        state["loss_sum"], state["loss_n"] = 0.0, 0
        stop = True
        if cfg.train.target is not None and acc >= cfg.train.target:
            state["to_target"], state["reason"] = record, "target reached"
        elif cfg.train.max_fresh_examples and fresh_all >= cfg.train.max_fresh_examples:
            state["reason"] = "max_fresh_examples reached"
        else:
            stop = False
        if rank == 0:
            collector.event.remote(record)
        _send_audit(collector, audit)
        return stop

    def epoch_due() -> bool:
        if not by_fresh:
            return counters.steps % spe == 0
        (fresh_all,) = all_reduce_ints([counters.fresh])
        return fresh_all >= (state["epoch"] + 1) * n_train

    if cfg.echo.separate_copies and cfg.echo.stage in ("before_augment", "after_augment"):
        batches = pack_unique(batches, cfg.train.batch_size)
    model.train()
    stop = False
    t_wait = time.perf_counter()
    t_first = None
    for batch_index, batch in enumerate(batches):
        waited = time.perf_counter() - t_wait
        if t_first is None:
            t_first, waited = time.perf_counter(), 0.0  # pipeline start-up is not a wait
        state["batches"] += 1
        state["dup_batches"] += has_duplicates(batch)
        images = torch.from_numpy(batch["image"])
        if ops_on_worker is not None:
            keys = augment_keys(cfg.seed, batch, per_copy=True)
            images = augment_batch(images.to(device, non_blocking=True), keys, ops_on_worker)
            batch["aug_key"] = to_int63(keys)
        labels = torch.as_tensor(np.array(batch["label"]), device=device)
        n = len(labels)
        reps = repeats(batch_index)
        for rep in range(reps):
            t0 = time.perf_counter()
            set_lr(opt, cfg.optimizer.lr, lr_multiplier(counters.steps / spe, cfg.train.max_epochs, cfg.schedule))
            loss = F.cross_entropy(model(normalize(images)), labels)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            state["loss_sum"] += float(loss.detach())
            state["loss_n"] += 1
            fresh = int((batch["echo_copy"] == 0).sum()) if rep == 0 else 0
            counters.add_step(fresh, n, waited if rep == 0 else 0.0, time.perf_counter() - t0)
            audit.add(
                epoch=batch["epoch"], step=counters.steps - 1, worker=rank, group=group,
                sample_id=batch["sample_id"], view=batch["echo_copy"] if reps == 1 else rep,
                ba_view=0, aug_key=batch.get("aug_key", np.zeros(n, np.int64)),
            )
            now = time.perf_counter()
            if counters.steps == 1 or now - last_beat >= HEARTBEAT_S:
                collector.heartbeat.remote(rank, counters.steps, counters.trained, counters.step_s)
                last_beat = now
            if epoch_due() and evaluate_and_decide():
                stop = True
                break
        if stop:
            break
        t_wait = time.perf_counter()
    if not stop and counters.steps > state["eval_step"]:
        evaluate_and_decide()  # the stream ended inside an epoch: score what was trained

    loop_s = time.perf_counter() - t_first if t_first is not None else 0.0
    fresh_all, trained_all, dups, nb = all_reduce_ints(
        [counters.fresh, counters.trained, state["dup_batches"], state["batches"]])
    collector.heartbeat.remote(rank, counters.steps, counters.trained, counters.step_s)
    _send_audit(collector, audit)
    if rank == 0:
        collector.finish.remote({
            "epochs": state["epoch"], "steps": counters.steps, "fresh_examples": fresh_all,
            "trained_examples": trained_all, "best_accuracy": state["best"], "last_accuracy": state["acc"],
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
