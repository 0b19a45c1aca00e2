"""What bounds echo's time to target on digits: fresh examples to 97% against the horizon
of the learning-rate schedule (issue 14, the 3.5x goal).

On an input-bound run the time to target is about the fresh examples it needs over the
source's rate, so the speed-up over e = 1 is about the ratio of fresh examples to target.
`factor: auto` steps its cosine schedule in optimizer steps per epoch at e = 1 (its
epochs end by fresh examples: echo_plan.EchoPlan.schedule_factor), so at e ~ 5 it anneals
about 5x sooner per fresh example than a fixed factor, whose epoch has e times the steps.
This script separates the two: fixed e = 1 and e = 4 with `train.max_epochs` (the
schedule's horizon and the read budget) 20 as in benchmarks/echo.py and a short horizon
about where auto's schedule ends at e ~ 5 (20 x 22 steps ~ 4 fresh epochs).
Fresh examples to target do not depend on the machine's speed (a fixed e trains the same
batches in the same order), so no emulated latency and no lock are needed: counts only.

    .venv/bin/python benchmarks/echo_schedule.py [--seeds 0,1,2] [--horizons 20,4]
"""

from __future__ import annotations

import argparse
import statistics

from common import save, settled_load, train_in_process

COMMON = ["source.chunk_size=16", "train.evals_per_epoch=4", "echo.shuffle_buffer=256",
          "scaling.cpus_per_worker=1", "train.target=0.97"]


def run(factor: str, horizon: int, seed: int) -> dict:
    overrides = [*COMMON, f"seed={seed}", f"echo.stage={'none' if factor == '1' else 'after_augment'}",
                 f"echo.factor={factor}", f"train.max_epochs={horizon}"]
    summary, _ = train_in_process(overrides, f"e{factor}-h{horizon}-s{seed}")
    return {"factor": factor, "horizon_epochs": horizon, "seed": seed, "target_reached": summary["target_reached"],
            "fresh_examples_to_target": summary["fresh_examples_to_target"], "accuracy": summary["metric"]["value"]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--horizons", default="20,4")
    ap.add_argument("--factors", default="1,4")
    args = ap.parse_args()
    import ray

    from echoray.runtime.session import start_ray

    load0 = settled_load()  # before this run's Ray starts: the machine's own load
    start_ray()
    runs = []
    for horizon in [int(h) for h in args.horizons.split(",")]:
        for factor in args.factors.split(","):
            for seed in [int(s) for s in args.seeds.split(",")]:
                runs.append(run(factor, horizon, seed))
                print(runs[-1], flush=True)
    cells = {}
    for r in runs:
        cells.setdefault((r["factor"], r["horizon_epochs"]), []).append(r["fresh_examples_to_target"])
    table = [{"factor": f, "horizon_epochs": h, "fresh_examples_to_target": v,
              "mean": statistics.fmean([x for x in v if x]) if any(v) else None,
              "reached": sum(x is not None for x in v)} for (f, h), v in cells.items()]
    for row in table:
        print(row)
    ray.shutdown()
    # the end's load once this run's Ray has shut down (its workers are not other work)
    print(f"saved {save('echo_schedule', {'rows': table, 'runs': runs}, args, start_load=load0, end_load=settled_load())}")


if __name__ == "__main__":
    main()
