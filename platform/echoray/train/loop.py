"""The per-worker training loop that Ray Train runs (`train_loop_per_worker`).

One pass over the run's single multi-epoch stream: an "epoch" on the worker is a
fixed number of optimizer steps (the same on every worker, so DDP stays in
lockstep), after which all workers evaluate, all-reduce and decide together
whether the target or the budget is reached.
"""

from __future__ import annotations

import math
import time
import warnings

import numpy as np
import ray.train
import ray.train.torch
import torch
import torch.nn.functional as F

from echoray.config import PipelineConfig
from echoray.data.augment import augment_batch, output_size
from echoray.data.echo import batch_repeats
from echoray.data.stages import augment_keys
from echoray.seeds import STREAM_MODEL, STREAM_SAMPLER, derive_seed, to_int63
from echoray.train.accounting import AuditBuffer, Counters
from echoray.train.evaluate import EvalSet, Normalizer, all_reduce_ints
from echoray.train.models import build_model
from echoray.train.optim import build_optimizer, lr_multiplier, set_lr


def steps_per_epoch(cfg: PipelineConfig, num_train: int, world: int) -> int:
    """Optimizer steps per epoch of fresh data, with the nominal echo factor."""
    factor = cfg.echo.factor if cfg.echo.factor != "auto" else 1.0
    per_step = world * cfg.train.batch_size
    if cfg.echo.stage in ("before_augment", "after_augment"):
        return max(1, math.floor(num_train * factor / per_step))
    fresh_steps = max(1, num_train // per_step)
    return max(1, round(fresh_steps * (factor if cfg.echo.stage == "batch" else 1.0)))


def run_worker(config: dict) -> None:
    # Ray Data hands out read-only arrays; the step only reads them (float() copies).
    warnings.filterwarnings("ignore", message="The given NumPy array is not writable")
    cfg = PipelineConfig.model_validate(config["cfg"])
    idx = config["index"]
    collector = config["collector"]
    ctx = ray.train.get_context()
    rank, world = ctx.get_world_rank(), ctx.get_world_size()
    t_start = time.time()

    torch.manual_seed(derive_seed(cfg.seed, STREAM_MODEL))
    device = ray.train.torch.get_device()
    model = ray.train.torch.prepare_model(build_model(cfg.model, idx.channels, idx.num_classes))
    opt = build_optimizer(model.parameters(), cfg.optimizer)
    normalize = Normalizer(cfg.preprocess.mean, cfg.preprocess.std, idx.channels, device)
    out_size = output_size(idx.image_size, cfg.preprocess.augment.ops)
    eval_set = EvalSet(idx, rank, world, out_size)

    augment_on_worker = cfg.preprocess.augment.on == "worker"
    spe = steps_per_epoch(cfg, len(idx.train_ids), world)
    counters, audit = Counters(), AuditBuffer(cfg.audit.enabled)
    group = rank // cfg.batch_augmentation.copies if cfg.batch_augmentation.mode == "grouped" else rank
    shard = ray.train.get_dataset_shard("train")
    batches = shard.iter_batches(
        batch_size=cfg.train.batch_size,
        batch_format="numpy",
        drop_last=True,
        local_shuffle_buffer_size=cfg.echo.shuffle_buffer or None,
        local_shuffle_seed=derive_seed(cfg.seed, STREAM_SAMPLER, rank),
        prefetch_batches=2,
    )
    model.train()
    epoch, stop, best, last_acc, reason = 0, False, 0.0, float("nan"), "data exhausted"
    to_target = None
    loss_sum, loss_n = 0.0, 0
    t_wait = time.perf_counter()
    for batch_index, batch in enumerate(batches):
        waited = time.perf_counter() - t_wait
        reps = batch_repeats(cfg.seed, rank, batch_index, cfg.echo.factor) if cfg.echo.stage == "batch" else 1
        images = torch.from_numpy(batch["image"])
        if augment_on_worker:
            keys = augment_keys(cfg.seed, batch, per_copy=True)
            images = augment_batch(images.to(device, non_blocking=True), keys, cfg.preprocess.augment.ops)
            batch["aug_key"] = to_int63(keys)
        labels = torch.as_tensor(np.array(batch["label"]), device=device)
        for rep in range(reps):
            t0 = time.perf_counter()
            set_lr(opt, cfg.optimizer.lr, lr_multiplier(counters.steps / spe, cfg.train.max_epochs, cfg.schedule))
            loss = F.cross_entropy(model(normalize(images)), labels)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            loss_sum, loss_n = loss_sum + float(loss.detach()), loss_n + 1
            n = len(labels)
            fresh = int((batch["echo_copy"] == 0).sum()) if rep == 0 else 0
            counters.add_step(fresh, n, waited if rep == 0 else 0.0, time.perf_counter() - t0)
            audit.add(
                epoch=batch["epoch"], step=counters.steps - 1, worker=rank, group=group,
                sample_id=batch["sample_id"], view=batch["echo_copy"] if reps == 1 else rep,
                ba_view=0, aug_key=batch.get("aug_key", np.zeros(n, np.int64)),
            )
            if rank == 0 and (counters.steps == 1 or counters.steps % 20 == 0):
                collector.heartbeat.remote(counters.steps)
            if counters.steps % spe:
                continue
            epoch += 1
            correct, total = eval_set.evaluate(model, normalize, cfg.train.batch_size)
            fresh_all, trained_all = all_reduce_ints([counters.fresh, counters.trained])
            last_acc = correct / total
            best = max(best, last_acc)
            record = {
                "epoch": epoch, "step": counters.steps, "accuracy": last_acc,
                "loss": loss_sum / max(loss_n, 1), "lr": opt.param_groups[0]["lr"],
                "fresh_examples": fresh_all, "trained_examples": trained_all,
                "elapsed_s": time.time() - t_start, "time": time.time(),
                "downstream_examples_per_s": counters.trained / max(counters.step_s, 1e-9),
                "wait_fraction": counters.wait_s / max(counters.wait_s + counters.step_s, 1e-9),
            }
            loss_sum, loss_n = 0.0, 0
            if cfg.train.target is not None and last_acc >= cfg.train.target:
                to_target = record
                stop, reason = True, "target reached"
            elif epoch >= cfg.train.max_epochs:
                stop, reason = True, "max_epochs reached"
            elif cfg.train.max_fresh_examples and fresh_all >= cfg.train.max_fresh_examples:
                stop, reason = True, "max_fresh_examples reached"
            if rank == 0:
                collector.event.remote(record)
            _send_audit(collector, audit)
            if stop:
                break
        if stop:
            break
        t_wait = time.perf_counter()

    fresh_all, trained_all, steps_all = all_reduce_ints([counters.fresh, counters.trained, counters.steps])
    _send_audit(collector, audit)
    if rank == 0:
        collector.finish.remote({
            "epochs": epoch, "steps": counters.steps, "fresh_examples": fresh_all,
            "trained_examples": trained_all, "best_accuracy": best, "last_accuracy": last_acc,
            "to_target": to_target, "stop_reason": reason, "world_size": world,
            "downstream_examples_per_s": counters.trained * world / max(counters.step_s, 1e-9),
            "wait_s": counters.wait_s, "step_s": counters.step_s,
            "device": str(device),
        })
    ray.get(collector.sync.remote())


def _send_audit(collector, audit: AuditBuffer) -> None:
    rows = audit.drain()
    if rows is not None:
        collector.add_audit.remote(rows)
