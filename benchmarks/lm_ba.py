"""Dropout batch augmentation on the small LM (benchmarks/lm.py --part ba): held-out bits
per byte against batch_augmentation.copies M = 1, 2, 4 at a fixed number of steps, over
seeds.

M copies of each sequence differ only in their dropout masks (the batch-augmentation
paper's "intermediate" augmentation, its Transformer setting). Every run reads the same
fresh sequences in the same number of optimizer steps (train.max_fresh_examples, with
evaluations placed so the last one falls on the budget: lm_common.evals_for); with M
copies a step trains on M x B rows. No target: the run's last held-out bits per byte is
its figure (lower is better), with mean, min and max over the seeds and each M's
difference from M = 1 of the same seed.

-> results/lm_ba.json
"""

from __future__ import annotations

from pathlib import Path

import lm_common
from common import save


def one_run(a, c: lm_common.Corpus, copies: int, seed: int) -> dict:
    budget = a.ba_budget_tokens // c.seq_len
    s = lm_common.run([f"batch_augmentation.copies={copies}", "batch_augmentation.mode=local", f"seed={seed}",
                       "train.target=null", f"train.batch_size={a.ba_batch}", f"train.max_fresh_examples={budget}",
                       f"train.evals_per_epoch={lm_common.evals_for(c, a.ba_batch, budget, a.ba_evals)}",
                       f"source.eval_limit={a.ba_eval_limit}", *a.set], f"ba-m{copies}-s{seed}")
    return {"copies": copies, "seed": seed, "bits_per_byte": s["metric"]["value"], "best_bits_per_byte": s["best_metric"],
            "steps": s["steps"], "fresh_tokens": s["text"]["fresh_tokens"], "trained_tokens": s["text"]["trained_tokens"],
            "views_per_sample": s["batch_augmentation"]["views_per_sample"], "wall_s": s["wall_s"],
            "curve": [(h["fresh_examples"], h.get("bits_per_byte")) for h in s["history"]]}


def rows(runs: list[dict]) -> list[dict]:
    """Per M: spread of the last bits per byte, and of its difference from M = 1 (same seed)."""
    base = {r["seed"]: r["bits_per_byte"] for r in runs if r["copies"] == 1}
    out = []
    for m in sorted({r["copies"] for r in runs}):
        mine = [r for r in runs if r["copies"] == m]
        out.append({"copies": m, "bits_per_byte": lm_common.spread([r["bits_per_byte"] for r in mine]),
                    "vs_m1": lm_common.spread([r["bits_per_byte"] - base[r["seed"]] for r in mine if r["seed"] in base]),
                    "steps": sorted({r["steps"] for r in mine}), "wall_s": lm_common.spread([r["wall_s"] for r in mine])})
    return out


def part(a, results: Path, scale: dict) -> list[str]:
    c = lm_common.corpus(a.set)
    runs = []
    for seed in a.ba_seeds:
        for m in a.ba_copies:  # the M of one seed side by side: drift hits them alike
            r = one_run(a, c, m, seed)
            runs.append(r)
            print(f"ba M {m} seed {seed}: {r['bits_per_byte']:.4f} bits/byte after {r['steps']} steps, "
                  f"{r['wall_s']:.1f} s", flush=True)
    table = rows(runs)
    for t in table:
        d = t["vs_m1"]
        print(f"ba M {t['copies']}: {t['bits_per_byte']['mean']:.4f} bits/byte "
              f"[{t['bits_per_byte']['min']:.4f}, {t['bits_per_byte']['max']:.4f}], vs M = 1 {d['mean']:+.4f}", flush=True)
    save(a.ba_name, {"corpus": vars(c), "model": lm_common.SMALL, "extra": a.set, "scale": scale, "rows": table,
                   "runs": runs}, a, path=results / f"{a.ba_name}.json", seeds=a.ba_seeds)
    return [a.ba_name]
