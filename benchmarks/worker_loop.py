"""The worker loop's own cost, on data already in memory, in one process (no Ray):

1. overhead: echoray's WorkerLoop vs a bare PyTorch loop (same model init, batches,
   optimizer; zero_grad / forward / cross-entropy / backward / step and nothing else),
   steps per CPU-second of this one-thread process for small_cnn and resnet20 on digits
   (wall-clock rates moved 2-3x between runs with the shared machine's load), after a
   warm-up pair not counted, runs interleaved A/B, B/A, A/B, ... Goal: within 3% (Ray Train's published overhead against
   plain DDP is within 2.5%).
2. precision: fp32 vs bf16 vs channels_last (and both) through WorkerLoop on this CPU:
   steps/s and held-out accuracy after a short digits training. Reported, no goal.

    .venv/bin/python benchmarks/worker_loop.py [--rounds 3] [--epochs 4]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import numpy as np
import torch
from common import save


def batches_in_memory(cfg, idx):
    from echoray.data.shuffle_buffer import shuffled_batches
    from echoray.train.local_run import preprocessed_blocks

    return list(shuffled_batches(preprocessed_blocks(cfg, idx), cfg.train.batch_size, 512, 0))


class CpuTimedEval:
    """The real held-out evaluation, its CPU time kept apart (it is not the loop's overhead)."""

    def __init__(self, inner):
        self.inner, self.cpu_s = inner, 0.0

    def evaluate(self, *args):
        t0 = time.process_time()
        try:
            return self.inner.evaluate(*args)
        finally:
            self.cpu_s += time.process_time() - t0


def echoray_steps_per_s(cfg, idx, batches) -> tuple[float, dict]:
    """Steps per second of CPU time of this process (one thread): the machine is shared
    and its load moves wall-clock rates by 2-3x between runs, CPU time far less."""
    from echoray.data.augment import output_size
    from echoray.train.evaluate import EvalSet
    from echoray.train.local_run import LocalCollector, local_loop

    col = LocalCollector()
    ev = CpuTimedEval(EvalSet(idx, 0, 1, output_size(idx.image_size, cfg.preprocess.augment.ops)))
    loop = local_loop(cfg, idx, col, evaluator=ev)
    t0, w0 = time.process_time(), time.perf_counter()
    final = loop.run(iter(batches))
    cpu = time.process_time() - t0 - ev.cpu_s
    wall = time.perf_counter() - w0 - final["eval_s"]
    return final["steps"] / cpu, {**final, "last_loss": col.events[-1]["loss"], "wall_steps_per_s": final["steps"] / wall}


def bare_steps_per_s(cfg, idx, batches) -> float:
    from echoray.seeds import STREAM_MODEL, derive_seed
    from echoray.train.models import build_model
    from echoray.train.optim import build_optimizer

    torch.manual_seed(derive_seed(cfg.seed, STREAM_MODEL))
    model = build_model(cfg.model, idx.channels, idx.num_classes)
    opt = build_optimizer(model.parameters(), cfg.optimizer)
    mean = torch.full((1, idx.channels, 1, 1), 0.5)
    model.train()
    t0 = time.process_time()
    for b in batches:
        x = (torch.from_numpy(b["image"]).permute(0, 3, 1, 2).float().div_(255.0) - mean) / 0.25
        y = torch.from_numpy(np.asarray(b["label"], dtype=np.int64))
        opt.zero_grad(set_to_none=True)
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
    float(loss.detach())
    return len(batches) / (time.process_time() - t0)


def overhead(model: str, rounds: int, epochs: int) -> dict:
    from echoray.config_load import load_config
    from echoray.data.sources import index_source

    cfg = load_config(None, ["train.target=null", f"train.max_epochs={epochs}", f"model.name={model}",
                             "train.checkpoint_every=0"])
    idx = index_source(cfg.source)
    batches = batches_in_memory(cfg, idx)
    # A warm-up pair, not counted, then each round's order swapped: in a quiet run with
    # neither, each arm's first round was its slowest (62 and 67 steps/s against 69-77
    # later) and the arm that ran first in every round read 7% slower.
    echoray_steps_per_s(cfg, idx, batches)
    bare_steps_per_s(cfg, idx, batches)
    echo, bare = [], []
    for r in range(rounds):
        arms = [lambda: echo.append(echoray_steps_per_s(cfg, idx, batches)[0]),
                lambda: bare.append(bare_steps_per_s(cfg, idx, batches))]
        for arm in arms if r % 2 == 0 else arms[::-1]:
            arm()
    e, b = statistics.median(echo), statistics.median(bare)
    paired = statistics.median(x / y for x, y in zip(echo, bare, strict=True))  # each round's A/B pair
    return {"model": model, "steps": len(batches), "echoray_steps_per_s": echo, "bare_steps_per_s": bare,
            "median_ratio": e / b, "median_paired_ratio": paired, "overhead_pct": 100 * (1 - paired)}


VARIANTS = (("fp32", False, False), ("bf16", False, False), ("fp32", True, False), ("bf16", True, False))


def precision(model: str, epochs: int, rounds: int, variants=VARIANTS) -> list[dict]:
    """Each variant once per round, rounds interleaved (the machine's load drifts)."""
    from echoray.config_load import load_config
    from echoray.data.sources import index_source

    rows = {}
    for _ in range(rounds):
        for prec, cl, comp in variants:
            cfg = load_config(None, ["train.target=null", f"train.max_epochs={epochs}", f"model.name={model}",
                                     "train.checkpoint_every=0", f"train.precision={prec}",
                                     f"train.channels_last={str(cl).lower()}", f"train.compile={str(comp).lower()}"])
            idx = index_source(cfg.source)
            rate, final = echoray_steps_per_s(cfg, idx, batches_in_memory(cfg, idx))
            row = rows.setdefault((prec, cl, comp), {
                "model": model, "precision": prec, "channels_last": cl, "compile": comp, "steps_per_s": [],
                "accuracy": final["last_accuracy"], "last_epoch_loss": final["last_loss"], "steps": final["steps"]})
            row["steps_per_s"].append(rate)
    out = []
    for row in rows.values():
        row["median_steps_per_s"] = statistics.median(row["steps_per_s"])
        out.append(row)
        print(row, flush=True)
    return out


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--epochs", type=int, default=4)
    p.add_argument("--models", default="small_cnn,resnet20")
    p.add_argument("--skip-precision", action="store_true")
    p.add_argument("--skip-overhead", action="store_true")
    p.add_argument("--name", default="worker_loop", help="results/NAME.json")
    p.add_argument("--compile", action="store_true", help="only fp32 vs fp32 + torch.compile")
    args = p.parse_args()
    torch.set_num_threads(1)  # one core per worker, as a Ray Train worker with cpus_per_worker=1
    load0, result = os.getloadavg(), {"threads": 1, "overhead": [], "precision": []}
    for m in args.models.split(",") if not args.skip_overhead else []:
        result["overhead"].append(overhead(m, args.rounds, args.epochs))
        print(result["overhead"][-1], flush=True)
    if args.compile:
        result["compile"] = [row for m in args.models.split(",") for row in
                             precision(m, args.epochs, args.rounds, (("fp32", False, False), ("fp32", False, True)))]
        print(save("worker_loop_compile", result, args, start_load=load0))
        return
    if not args.skip_precision:
        for m in args.models.split(","):
            result["precision"] += precision(m, args.epochs, args.rounds)
    print(save(args.name, result, args, start_load=load0))


if __name__ == "__main__":
    main()
