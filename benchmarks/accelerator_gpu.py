"""The worker loop's input overlap on a real GPU step (issue 60): a prepared device check.

ResNet-50 (bf16 + channels_last) on a real GPU, fed batches already in memory (the JPEG
pipeline's random-resized crops of benchmarks/jpeg_set.py images, made once on the CPU by
the same preprocessing as the actors, train/local_run.py): a WorkerLoop in this process
(no Ray) with its input work (pinned host-to-device copies, normalising on the GPU) on the
loop's thread one batch ahead of the step (`overlapped`, the default) against between the
steps (`serial`, WorkerLoop.lookahead = 0). Per arm, interleaved: steps/s over the loop's
training time, and the GPU's busy fraction from nvidia-smi (gpu_step.GpuBusy).

    python benchmarks/accelerator_gpu.py                # on a GPU machine: about 3 minutes
    python benchmarks/accelerator_gpu.py --tiny         # the CPU path (small_cnn, 64 files): a smoke

Writes benchmarks/results/accelerator_gpu.json (--tiny: accelerator_gpu_tiny.json).
"""

from __future__ import annotations

import argparse
import os
import time

import torch
from common import REPO, save
from gpu_step import GpuBusy
from jpeg_set import jpeg_folder


def in_memory(cfg, idx) -> list[dict]:
    from echoray.data.shuffle_buffer import shuffled_batches
    from echoray.train.local_run import preprocessed_blocks

    return list(shuffled_batches(preprocessed_blocks(cfg, idx), cfg.train.batch_size, 0, cfg.seed))


def one_arm(cfg, idx, batches: list[dict], lookahead: int, device: str) -> dict:
    from echoray.train.local_run import LocalCollector, local_loop

    loop = local_loop(cfg, idx, LocalCollector(), device=device)
    loop.lookahead = lookahead
    t0 = time.time()
    with GpuBusy() as busy:
        final = loop.run(iter(batches))
    train_s = final["loop_s"] - final["eval_s"]
    return {"lookahead": lookahead, "steps": final["steps"], "steps_per_s": final["steps"] / train_s,
            "wait_s": final["wait_s"], "step_s": final["step_s"], "train_s": train_s,
            "gpu_busy_fraction": busy.fraction(t0), "peak_gpu_mib": (final["peak_device_bytes"] or 0) / 2**20}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tiny", action="store_true", help="the CPU path: small_cnn on 64 files")
    ap.add_argument("--files", type=int, default=1024)
    ap.add_argument("--epochs", type=int, default=4)
    ap.add_argument("--repeats", type=int, default=2)
    args = ap.parse_args()
    from echoray.config_load import load_config
    from echoray.data.sources import index_source

    device = "cpu" if args.tiny else "cuda"
    if device == "cuda" and not torch.cuda.is_available():
        raise SystemExit("accelerator_gpu.py: no CUDA device (use --tiny for the CPU path)")
    files = 64 if args.tiny else args.files
    model = ["model.name=small_cnn", "model.width=8", "train.precision=fp32", "train.channels_last=false"] \
        if args.tiny else ["train.precision=bf16", "train.channels_last=true"]
    cfg = load_config(str(REPO / "pipelines" / "imagenet_resnet50.yaml"), [
        f"source.path={jpeg_folder(files)}", "source.eval_path=null", "source.holdout_fraction=0.05",
        f"train.batch_size={16 if args.tiny else 128}", f"train.max_epochs={1 if args.tiny else args.epochs}",
        "train.target=null", "train.checkpoint_every=0", "scaling.max_failures=0", *model])
    idx = index_source(cfg.source)
    batches = in_memory(cfg, idx)
    load0, runs = os.getloadavg(), []
    arms = (("overlapped", 1), ("serial", 0))
    for rep in range(1 if args.tiny else args.repeats):
        for name, la in arms if rep % 2 == 0 else arms[::-1]:
            runs.append({"arm": name, "repeat": rep, **one_arm(cfg, idx, batches, la, device)})
            print(runs[-1], flush=True)
    out = {"device": torch.cuda.get_device_name(0) if device == "cuda" else "cpu", "batches": len(batches),
           "batch_size": cfg.train.batch_size, "runs": runs}
    print(save("accelerator_gpu_tiny" if args.tiny else "accelerator_gpu", out, args, start_load=load0))


if __name__ == "__main__":
    main()
