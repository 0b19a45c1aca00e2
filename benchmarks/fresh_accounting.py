"""How far the old fresh-example count was off (issue 18), on digits with echo.

The old loop counted a fresh example when the copy with echo_copy == 0 was trained; the
new one when the first copy is, whichever that is. One run's audit gives both: old =
rows with view 0 among the steps before the target, new = distinct (epoch, sample_id)
among them (what the loop now reports, checked here). The worker loop runs in this
process on the platform's preprocessing and a 512-row shuffle buffer (train/local_run.py).

    .venv/bin/python benchmarks/fresh_accounting.py [--seeds 3]
"""

from __future__ import annotations

import argparse
import statistics

import numpy as np
import torch
from common import save

CASES = (("before_augment", 2.0), ("after_augment", 2.0), ("before_augment", 2.5))


def run(stage: str, factor: float, seed: int, target: float) -> dict:
    from echoray.config_load import load_config
    from echoray.data.shuffle_buffer import shuffled_batches
    from echoray.data.sources import index_source
    from echoray.train.local_run import (
        LocalCollector,
        local_loop,
        preprocessed_blocks,
    )

    cfg = load_config(None, [f"seed={seed}", f"train.target={target}", "train.max_epochs=20", "audit.enabled=true",
                             f"echo.stage={stage}", f"echo.factor={factor}", "train.checkpoint_every=0"])
    idx = index_source(cfg.source)
    col = LocalCollector()
    final = local_loop(cfg, idx, col).run(shuffled_batches(preprocessed_blocks(cfg, idx), 64, 512, seed))
    hit = final["to_target"]
    if hit is None:
        return {"stage": stage, "factor": factor, "seed": seed, "reached": False}
    a = col.audit_columns()
    before = a["step"] < hit["step"]
    new = len(set(zip(a["epoch"][before].tolist(), a["sample_id"][before].tolist(), strict=True)))
    assert new == hit["fresh_examples"]
    old = int((a["view"][before] == 0).sum())
    return {"stage": stage, "factor": factor, "seed": seed, "reached": True, "steps": hit["step"],
            "fresh_to_target_old": old, "fresh_to_target_new": new, "moved_pct": 100 * (new - old) / old}


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--target", type=float, default=0.95)
    args = p.parse_args()
    torch.set_num_threads(1)
    rows = [run(s, f, seed, args.target) for s, f in CASES for seed in range(args.seeds)]
    for r in rows:
        print(r, flush=True)
    summary = []
    for s, f in CASES:
        moved = [r["moved_pct"] for r in rows if r["stage"] == s and r["factor"] == f and r["reached"]]
        if moved:
            summary.append({"stage": s, "factor": f, "median_moved_pct": statistics.median(moved),
                            "min": min(moved), "max": max(moved), "runs": len(moved)})
    print(save("fresh_accounting", {"target": args.target, "runs": rows, "summary": summary,
                                    "numpy": np.__version__}, args))


if __name__ == "__main__":
    main()
