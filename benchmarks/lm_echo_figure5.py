"""Figure 5 of the data-echoing paper on this project's LM: fresh tokens needed to reach a
bits-per-byte target against the echo factor e, at two batch sizes, over seeds.

For every (batch size, e, seed) it runs `echoray train PIPELINE` with echo.stage (batch
echo by default, as the paper's Transformer experiments; --stage before_augment for
example echo), echo.factor e and that batch size and seed, and reads summary.json:
fresh tokens to target = fresh_examples_to_target x seq_len (null when the run did not
reach the target within its budget). It saves benchmarks/results/lm_echo_figure5.json and
a plot: mean over seeds with min/max bars per batch size, and the dotted line
baseline / e (repeated tokens worth as much as fresh ones).

Unlike the paper, the optimizer settings are the pipeline's for every point (no search
per point); `echoray study` with an LM pipeline does the tuned comparison.

    .venv/bin/python benchmarks/lm_echo_figure5.py [--pipeline pipelines/lm_linux_doc.yaml]
        [--factors 1 2 4 8 16] [--batch-sizes 32 128] [--seeds 0 1 2] [--target 2.6]
        [--stage batch] [--set key=value ...] [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

from common import REPO, RESULTS


def one_run(args, batch: int, e: float, seed: int, out: Path) -> dict:
    exe = Path(sys.executable).parent / "echoray"
    sets = [f"echo.stage={args.stage if e > 1 else 'none'}", f"echo.factor={e}", f"train.batch_size={batch}",
            f"seed={seed}", f"train.target={args.target}", "train.log_every_s=0", *args.set]
    cmd = [str(exe), "train", args.pipeline, "--out", str(out)] + [x for s in sets for x in ("--set", s)]
    env = {**os.environ, "PYTHONPATH": str(REPO / "platform")}
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stdout[-2000:]}{proc.stderr[-2000:]}")
    s = json.loads((out / "summary.json").read_text())
    seq_len = s["text"]["seq_len"]
    hit = s["fresh_examples_to_target"]
    return {"batch_size": batch, "factor": e, "seed": seed, "reached": s["target_reached"],
            "fresh_tokens_to_target": hit * seq_len if hit is not None else None,
            "fresh_tokens": s["text"]["fresh_tokens"], "best_bits_per_byte": s["best_metric"],
            "wall_s": s["wall_s"], "run_dir": s["run_dir"]}


def spread(values: list[float]) -> dict:
    if not values:
        return {"mean": None, "min": None, "max": None, "n": 0}
    return {"mean": statistics.fmean(values), "min": min(values), "max": max(values), "n": len(values)}


def plot(points: list[dict], path: Path, title: str) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5.5, 4.0))
    for batch in sorted({p["batch_size"] for p in points}):
        mine = sorted((p for p in points if p["batch_size"] == batch and p["n"]), key=lambda p: p["factor"])
        if not mine:
            continue
        xs = [p["factor"] for p in mine]
        mean = [p["mean"] for p in mine]
        err = [[m - p["min"] for m, p in zip(mean, mine, strict=True)], [p["max"] - m for m, p in zip(mean, mine, strict=True)]]
        line = ax.errorbar(xs, mean, yerr=err, marker="o", capsize=4, label=f"batch {batch}")
        base = next((p["mean"] for p in mine if p["factor"] == 1), None)
        if base:
            ax.plot(xs, [base / x for x in xs], linestyle="dotted", color=line[0].get_color())
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("echo factor e")
    ax.set_ylabel("fresh tokens to target")
    ax.set_title(title + "\n(dotted: baseline / e)", fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--pipeline", default=str(REPO / "pipelines" / "lm_linux_doc.yaml"))
    ap.add_argument("--factors", type=float, nargs="+", default=[1, 2, 4, 8, 16])
    ap.add_argument("--batch-sizes", type=int, nargs="+", default=[32, 128])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--target", type=float, default=3.3, help="bits per byte to reach (from above)")
    ap.add_argument("--stage", default="batch", choices=["batch", "before_augment"])
    ap.add_argument("--set", action="append", default=[], help="extra key=value for every run")
    ap.add_argument("--out", default=str(RESULTS / "lm_echo_figure5"))
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    runs = []
    for batch in args.batch_sizes:
        for e in args.factors:
            for seed in args.seeds:
                r = one_run(args, batch, e, seed, out / f"b{batch}-e{e:g}-s{seed}")
                runs.append(r)
                print(f"batch {batch} e {e:g} seed {seed}: "
                      + (f"{r['fresh_tokens_to_target']:,} fresh tokens to target" if r["reached"]
                         else f"not reached (best {r['best_bits_per_byte']:.4f} bpb)"), flush=True)
    points = [{"batch_size": b, "factor": e,
               **spread([r["fresh_tokens_to_target"] for r in runs
                         if r["batch_size"] == b and r["factor"] == e and r["reached"]])}
              for b in args.batch_sizes for e in args.factors]
    title = f"{Path(args.pipeline).stem}: {args.stage} echo, target {args.target} bits/byte, {len(args.seeds)} seeds"
    png = plot(points, out / "figure5_fresh_tokens.png", title)
    result = {"pipeline": args.pipeline, "stage": args.stage, "target_bits_per_byte": args.target,
              "extra": args.set, "points": points, "runs": runs, "plot": str(png), "load_after": os.getloadavg()}
    (out / "lm_echo_figure5.json").write_text(json.dumps(result, indent=2))
    print(f"-> {out / 'lm_echo_figure5.json'}, {png}")


if __name__ == "__main__":
    main()
