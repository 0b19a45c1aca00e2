"""Batch augmentation on digits: accuracy vs M at a fixed number of steps (3 seeds),
against a large-batch baseline that sees as many samples, and throughput vs M.

- "fixed #steps": B = 64, M = 1, 2, 4, 8, the same number of optimizer steps; held-out
  accuracy mean and min/max over 3 seeds (the paper's comparison, Hoffer et al. 2020).
- "fixed #samples": the baseline with batch M*B and M times the epochs (as many
  examples per step as BA, but all distinct) at the same number of steps.
- "grouped vs local" (4 CPU workers, M = 2 and 4): grouped mode (W = 4 workers in 4/M
  groups, member m makes view m of the group's batch) against local mode with the same
  samples and views per step (W = 4/M workers, each making all M views); same B, steps,
  seeds. They differ only in batch-norm statistics (per worker: B distinct samples, vs
  all M*B rows of a worker) and the dropout streams (one per rank).
- train-step throughput versus M on this CPU (the paper's Table 5 style), in samples/s
  (the downstream rate behind measured R) and views/s (rows through the model), and the
  worker-side augmentation ops alone (crop + flip + cutout at 32x32) in samples/s.
  The published GPU figure (about 3.3 million samples/s on a V100) needs a GPU: with
  none lent to this session it is unmeasured here.

    .venv/bin/python benchmarks/batch_augmentation.py [--seeds 3] [--epochs 2] [--limit 0]

--limit N trains on the first N digits only (0: all), to fit a loaded machine.
--stall-timeout S sets train.stall_timeout_s (a loaded machine can pause a run for minutes).

Every run it reports is run by this invocation (nothing is read from earlier results or
a cache), so benchmarks/results/batch_augmentation.json is regenerated from the
repository alone; the file records the load average at start and end and the commit
(benchmarks/common.py's `save`).
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import common
from common import RESULTS, save, settled_load, train_in_process

COPIES = (1, 2, 4, 8)
GROUPED_COPIES = (2, 4)
GROUPED_WORKERS = 4
WORKER_OPS = "preprocess.augment.ops=[{op: random_crop, padding: 2}]"


STALL_TIMEOUT_S: int | None = None


def run(copies: int, seed: int, epochs: int, batch: int = 64, mode: str = "local", workers: int = 1,
        limit: int = 0) -> dict:
    overrides = [f"seed={seed}", "train.target=null", f"train.max_epochs={epochs}", f"train.batch_size={batch}",
                 "preprocess.augment.on=worker", f"batch_augmentation.copies={copies}",
                 f"batch_augmentation.mode={mode}", f"scaling.num_workers={workers}"]
    if common.PIPELINE is None:  # digits: its crop, on the worker; a given pipeline keeps its own ops
        overrides.append(WORKER_OPS)
    if workers > 1:  # 2 logical CPUs hold the workers and the preprocessing actors
        overrides.append(f"scaling.cpus_per_worker={1 / workers}")
    if limit:
        overrides.append(f"source.limit={limit}")
    if STALL_TIMEOUT_S:
        overrides.append(f"train.stall_timeout_s={STALL_TIMEOUT_S}")
    s, peak = train_in_process(overrides, f"ba-{mode}-w{workers}-m{copies}-s{seed}")
    ba = s["batch_augmentation"]
    samples_per_s = s["downstream_examples_per_s"]  # trained samples/s: a sample's views count once
    return {"copies": copies, "mode": mode, "workers": workers, "seed": seed, "batch": batch, "epochs": epochs,
            "steps": s["steps"], "accuracy": s["metric"]["value"], "trained": s["trained_examples"],
            "trained_samples": s["trained_samples"], "fresh": s["fresh_examples"],
            "measured_echo_factor": s["echo"]["measured_factor"], "views_per_sample": ba["views_per_sample"],
            "views_per_step": ba["views_per_step"], "samples_per_s": samples_per_s,
            "views_per_s": samples_per_s * ba["views_per_sample"] if samples_per_s else None,
            "wall_s": s["wall_s"], "peak_pss_gib": peak / 2**30}


def ops_throughput(n: int = 8192, size: int = 32, repeats: int = 5) -> float:
    import numpy as np
    import torch

    from echoray.config import AugmentOp
    from echoray.data.augment import augment_batch
    from echoray.seeds import mix

    ops = [AugmentOp(op="random_crop", padding=4), AugmentOp(op="flip"), AugmentOp(op="cutout", size=16)]
    x = torch.randint(0, 255, (n, size, size, 3), dtype=torch.uint8)
    keys = mix(0, np.arange(n))
    augment_batch(x, keys, ops)  # warm-up
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        augment_batch(x, keys, ops)
        times.append(time.perf_counter() - t0)
    return n / statistics.median(times)


def stats(values: list[float]) -> dict:
    return {"mean": statistics.mean(values), "min": min(values), "max": max(values)}


def plot(table: dict, path, data: str = "digits") -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    for key, label, fmt in (("ba", "batch augmentation, local (1 worker, B=64, M views)", "o-"),
                            ("baseline", "baseline: batch M*B, M x epochs", "s--"),
                            ("grouped", "grouped, 4 workers in 4/M groups (M=2: half the steps)", "^"),
                            ("local_same_step", "local, 4/M workers, same samples+views/step", "v")):
        ms = [m for m in COPIES if m in table[key]]
        if not ms:
            continue
        mean = [table[key][m]["mean"] for m in ms]
        lo = [table[key][m]["mean"] - table[key][m]["min"] for m in ms]
        hi = [table[key][m]["max"] - table[key][m]["mean"] for m in ms]
        ax.errorbar(ms, mean, yerr=[lo, hi], fmt=fmt, capsize=4, label=label)
    ax.set_xscale("log", base=2)
    ax.set_xticks(COPIES, [str(m) for m in COPIES])
    ax.set_xlabel("M (views per sample / batch multiplier)")
    ax.set_ylabel("held-out accuracy after a fixed number of steps")
    ax.set_title(f"Batch augmentation on {data}\n(mean, min/max over seeds)", fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--limit", type=int, default=0)
    ap.add_argument("--grouped-seeds", type=int, default=None, help="seeds of the grouped comparison (default --seeds)")
    ap.add_argument("--stall-timeout", type=int, default=None)
    ap.add_argument("--pipeline", default=None, help="the pipeline YAML to train (default: the embedded digits)")
    ap.add_argument("--name", default="batch_augmentation", help="results file stem: NAME.json, NAME_accuracy.png")
    args = ap.parse_args()
    common.PIPELINE = args.pipeline
    global STALL_TIMEOUT_S
    STALL_TIMEOUT_S = args.stall_timeout
    from echoray.runtime.session import start_ray

    start_ray()
    t0 = time.time()
    one = dict(epochs=args.epochs, limit=args.limit)
    runs = {"ba": [], "baseline": [], "grouped": [], "local_same_step": []}
    for m in COPIES:
        for seed in range(args.seeds):
            runs["ba"].append(run(m, seed, **one))
            print(runs["ba"][-1], flush=True)
            if m > 1:
                runs["baseline"].append(run(1, seed, args.epochs * m, batch=64 * m, limit=args.limit))
                runs["baseline"][-1]["copies"] = m
                print(runs["baseline"][-1], flush=True)
    for m in GROUPED_COPIES:
        for seed in range(args.grouped_seeds or args.seeds):
            runs["grouped"].append(run(m, seed, mode="grouped", workers=GROUPED_WORKERS, **one))
            print(runs["grouped"][-1], flush=True)
            local_workers = GROUPED_WORKERS // m  # same samples and views per step as the grouped run
            same = [r for r in runs["ba"] if r["copies"] == m and r["seed"] == seed] if local_workers == 1 else []
            runs["local_same_step"].append(same[0] if same else run(m, seed, workers=local_workers, **one))
            print(runs["local_same_step"][-1], flush=True)
    table = {k: {m: stats([r["accuracy"] for r in v if r["copies"] == m]) for m in COPIES
                 if any(r["copies"] == m for r in v)} for k, v in runs.items()}
    table["baseline"][1] = table["ba"][1]  # M = 1 is the same run for both
    speed = {k: {m: {u: statistics.median(r[u] for r in v if r["copies"] == m) for u in ("samples_per_s", "views_per_s")}
                 for m in table[k]} for k, v in runs.items() if k != "baseline"}
    ops_rate = ops_throughput()

    print(f"\n{'M':>3} {'BA acc mean [min, max]':>28} {'baseline acc mean [min, max]':>30} "
          f"{'samples/s':>10} {'views/s':>10}")
    for m in COPIES:
        b, c = table["ba"][m], table["baseline"][m]
        print(f"{m:>3} {b['mean']:>10.4f} [{b['min']:.4f}, {b['max']:.4f}] {c['mean']:>12.4f} "
              f"[{c['min']:.4f}, {c['max']:.4f}] {speed['ba'][m]['samples_per_s']:>10.0f} "
              f"{speed['ba'][m]['views_per_s']:>10.0f}")
    print(f"\n{'M':>3} {'grouped W=4 acc':>26} {'local W=4/M acc':>26} {'grouped samples/s':>18} {'local samples/s':>16}")
    for m in GROUPED_COPIES:
        g, loc = table["grouped"][m], table["local_same_step"][m]
        print(f"{m:>3} {g['mean']:>8.4f} [{g['min']:.4f}, {g['max']:.4f}] {loc['mean']:>8.4f} "
              f"[{loc['min']:.4f}, {loc['max']:.4f}] {speed['grouped'][m]['samples_per_s']:>18.0f} "
              f"{speed['local_same_step'][m]['samples_per_s']:>16.0f}")
    print(f"worker-side crop+flip+cutout at 32x32 on this CPU: {ops_rate:,.0f} samples/s "
          "(GPU goal > 3 million/s: unmeasured, no device lent)")
    png = RESULTS / f"{args.name}_accuracy.png"
    RESULTS.mkdir(exist_ok=True)
    plot(table, png, Path(args.pipeline).stem if args.pipeline else "digits")
    path = save(args.name, {"runs": runs, "accuracy": table, "train_step_throughput": speed,
                                       "cpu_augment_samples_per_s": ops_rate, "gpu_augment_samples_per_s": None,
                                       "benchmark_wall_s": time.time() - t0, "plot": png.name}, args,
                end_load=settled_load())
    print(f"saved {path} and {png}")


if __name__ == "__main__":
    main()
