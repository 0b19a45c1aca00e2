"""Batch augmentation on digits: accuracy vs M at a fixed number of steps (3 seeds),
against a large-batch baseline that sees as many samples, and throughput vs M.

- "fixed #steps": B = 64, M = 1, 2, 4, 8, the same number of optimizer steps; held-out
  accuracy mean and min/max over 3 seeds (the paper's comparison, Hoffer et al. 2020).
- "fixed #samples": the baseline with batch M*B and M times the epochs (as many
  examples per step as BA, but all distinct) at the same number of steps.
- train-step examples/s versus M on this CPU (the paper's Table 5 style), and the
  worker-side augmentation ops alone (crop + flip + cutout at 32x32) in samples/s.
  The published GPU figure (about 3.3 million samples/s on a V100) needs a GPU: with
  none lent to this session it is unmeasured here.

    .venv/bin/python benchmarks/batch_augmentation.py [--seeds 3] [--epochs 2]
"""

from __future__ import annotations

import argparse
import statistics
import time

from common import RESULTS, save, train_in_process

COPIES = (1, 2, 4, 8)
WORKER_OPS = "preprocess.augment.ops=[{op: random_crop, padding: 2}]"


def run(copies: int, seed: int, epochs: int, batch: int = 64) -> dict:
    overrides = [f"seed={seed}", "train.target=null", f"train.max_epochs={epochs}", f"train.batch_size={batch}",
                 "preprocess.augment.on=worker", WORKER_OPS, f"batch_augmentation.copies={copies}"]
    s, peak = train_in_process(overrides, f"ba-m{copies}-s{seed}")
    return {"copies": copies, "seed": seed, "batch": batch, "epochs": epochs, "steps": s["steps"],
            "accuracy": s["metric"]["value"], "trained": s["trained_examples"], "fresh": s["fresh_examples"],
            "examples_per_s": s["downstream_examples_per_s"], "peak_pss_gib": peak / 2**30}


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


def plot(table: dict, path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    for key, label, fmt in (("ba", "batch augmentation (B=64, M views)", "o-"),
                            ("baseline", "baseline: batch M*B, M x epochs", "s--")):
        ms = [m for m in COPIES if m in table[key]]
        mean = [table[key][m]["mean"] for m in ms]
        lo = [table[key][m]["mean"] - table[key][m]["min"] for m in ms]
        hi = [table[key][m]["max"] - table[key][m]["mean"] for m in ms]
        ax.errorbar(ms, mean, yerr=[lo, hi], fmt=fmt, capsize=4, label=label)
    ax.set_xscale("log", base=2)
    ax.set_xticks(COPIES, [str(m) for m in COPIES])
    ax.set_xlabel("M (views per sample / batch multiplier)")
    ax.set_ylabel("held-out accuracy after a fixed number of steps")
    ax.set_title("Batch augmentation on digits (mean, min/max over seeds)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--epochs", type=int, default=2)
    args = ap.parse_args()
    from echoray.runtime.session import start_ray

    start_ray()
    runs = {"ba": [], "baseline": []}
    for m in COPIES:
        for seed in range(args.seeds):
            runs["ba"].append(run(m, seed, args.epochs))
            print(runs["ba"][-1], flush=True)
            if m > 1:
                runs["baseline"].append(run(1, seed, args.epochs * m, batch=64 * m))
                runs["baseline"][-1]["copies"] = m
                print(runs["baseline"][-1], flush=True)
    table = {k: {m: stats([r["accuracy"] for r in v if r["copies"] == m]) for m in COPIES
                 if any(r["copies"] == m for r in v)} for k, v in runs.items()}
    table["baseline"][1] = table["ba"][1]  # M = 1 is the same run for both
    speed = {m: statistics.median(r["examples_per_s"] for r in runs["ba"] if r["copies"] == m) for m in COPIES}
    ops_rate = ops_throughput()

    print(f"\n{'M':>3} {'BA acc mean [min, max]':>28} {'baseline acc mean [min, max]':>30} {'step ex/s':>10}")
    for m in COPIES:
        b, c = table["ba"][m], table["baseline"][m]
        print(f"{m:>3} {b['mean']:>10.4f} [{b['min']:.4f}, {b['max']:.4f}] {c['mean']:>12.4f} "
              f"[{c['min']:.4f}, {c['max']:.4f}] {speed[m]:>10.0f}")
    print(f"worker-side crop+flip+cutout at 32x32 on this CPU: {ops_rate:,.0f} samples/s "
          "(GPU goal > 3 million/s: unmeasured, no device lent)")
    png = RESULTS / "batch_augmentation_accuracy.png"
    RESULTS.mkdir(exist_ok=True)
    plot(table, png)
    path = save("batch_augmentation", {"runs": runs, "accuracy": table, "train_step_examples_per_s": speed,
                                       "cpu_augment_samples_per_s": ops_rate, "gpu_augment_samples_per_s": None,
                                       "plot": png.name})
    print(f"saved {path} and {png}")


if __name__ == "__main__":
    main()
