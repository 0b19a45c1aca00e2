"""The worker loop's own overhead with free data (issue 60): how busy the emulated
accelerator (accelerator_model.py, form "wait") stays when its input costs nothing.

The digits default's batches are made once and held in memory (train/local_run.py, as
benchmarks/worker_loop.py does), then a WorkerLoop in this process (no Ray) trains on them
with the accelerator at us_per_sample per sample, queued --queue-steps ahead of the host
as on a GPU stream (0: synchronous steps, the host's whole per-step work shows as idle). Busy = the accelerator's time in steps
over the span from its first step to its last, evaluation taken out (accelerator_model.
busy_fraction). Arms, interleaved, order swapped every repeat:

- overlapped: the loop's input work (packing, formatting, normalising, host-to-device
  copies) on its thread one batch ahead of the step (train/prefetch.py), the default;
- serial: WorkerLoop.lookahead = 0, all of it between the steps.

Goal: overlapped >= 0.97 busy (what is left is the loop's own bookkeeping per step).

    python benchmarks/accelerator_free_data.py [--us 405] [--epochs 4] [--repeats 3] [--queue-steps 1]
    python benchmarks/accelerator_free_data.py --quick      # smoke: 1 epoch, 1 repeat

Writes benchmarks/results/accelerator_free_data.json (--quick: accelerator_free_data_quick.json).
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile

import torch
from accelerator_model import SETTINGS, busy_fraction, read_busy
from common import save


def one_run(us: float, epochs: int, lookahead: int, batch: int, queue_steps: int) -> dict:
    from echoray.config_load import load_config
    from echoray.data.shuffle_buffer import shuffled_batches
    from echoray.data.sources import index_source
    from echoray.train.local_run import LocalCollector, local_loop, preprocessed_blocks

    with tempfile.TemporaryDirectory() as busy:
        cfg = load_config(None, ["train.target=null", f"train.max_epochs={epochs}", "train.checkpoint_every=0",
                                 f"train.batch_size={batch}", "model.name=accelerator_model:factory",
                                 f'model.kwargs={{"us_per_sample": {us}, "busy_log": "{busy}", "queue_steps": {queue_steps}}}'])
        idx = index_source(cfg.source)
        batches = list(shuffled_batches(preprocessed_blocks(cfg, idx), batch, 512, 0))  # free: in memory
        loop = local_loop(cfg, idx, LocalCollector())
        loop.lookahead = lookahead
        final = loop.run(iter(batches))
        (proc,) = read_busy(busy)
    return {"lookahead": lookahead, **busy_fraction(proc), "loop_steps": final["steps"],
            "wait_s": final["wait_s"], "step_s": final["step_s"], "loop_s": final["loop_s"], "eval_s": final["eval_s"]}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--us", type=float, default=SETTINGS["R3"][1], help="accelerator us per sample")
    ap.add_argument("--epochs", type=int, default=4)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--queue-steps", type=int, default=1,
                    help="steps the host may run ahead of the device (0: synchronous steps)")
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    name = "accelerator_free_data" + ("" if args.queue_steps == 1 else f"_queue{args.queue_steps}")
    if args.quick:
        args.epochs, args.repeats, name = 1, 1, name + "_quick"
    torch.set_num_threads(1)  # one core per worker, as a Ray Train worker with cpus_per_worker=1
    load0, runs = os.getloadavg(), []
    arms = {"overlapped": 1, "serial": 0}
    for rep in range(args.repeats):
        for arm, la in (arms.items() if rep % 2 == 0 else list(arms.items())[::-1]):
            r = {"arm": arm, "repeat": rep, **one_run(args.us, args.epochs, la, args.batch, args.queue_steps)}
            runs.append(r)
            print(f"{arm} rep {rep}: busy {r['busy']:.4f} (raw {r['busy_raw']:.4f}) over {r['steps']} steps",
                  flush=True)
    summary = {arm: {"busy_median": statistics.median(r["busy"] for r in runs if r["arm"] == arm),
                     "busy_raw_median": statistics.median(r["busy_raw"] for r in runs if r["arm"] == arm)}
               for arm in arms}
    goal = {"overlapped_busy_ge_0_97": summary["overlapped"]["busy_median"] >= 0.97}
    print(summary, goal)
    print(save(name, {"us_per_sample": args.us, "queue_steps": args.queue_steps, "summary": summary, "goal": goal, "runs": runs}, args,
               start_load=load0))


if __name__ == "__main__":
    main()
