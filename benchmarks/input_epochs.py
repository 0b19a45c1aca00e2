"""Start-up and steady state, echoray vs a torch DataLoader, on the same files and cores.

Each arm runs from nothing (pool or workers not yet started) for `seconds` after its
first batch, which spans several epochs of the small JPEG set. From the (time, examples)
marks of every batch: the first batch's time, the first epoch's time including start-up
(the batch at which the examples reach the training set's size), the steady rate over
the epochs after the first, and images per CPU-second in steady state (echoray: the
actors, and actors + driver, over the second half of the time after the first batch, as
bench-input reports it; DataLoader: its workers + main process after the first epoch). The limit to set
those against is `decode_limit`: simplejpeg's full decode alone, in one thread, of the
same files, in images per CPU-second. Arms rotate per repeat; load is recorded at
each run's start and end.

Used by input_pipeline.py (--parts epochs); the DataLoader arm runs in a subprocess.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import numpy as np
from common import settled_load

SEED = 0  # the DataLoader's torch seed; echoray's is the pipeline's seed (0)


def epoch_figures(marks: list[tuple[float, int]], n_train: int) -> dict:
    """marks: (seconds since start, examples so far) per batch -> first batch, first epoch
    (start-up included), steady rate after the first epoch (None: too few epochs)."""
    first_epoch = next((t for t, n in marks if n >= n_train), None)
    later = [(t, n) for t, n in marks if n >= n_train]
    steady = None
    if len(later) >= 2 and later[-1][0] > later[0][0]:
        steady = (later[-1][1] - later[0][1]) / (later[-1][0] - later[0][0])
    return {"first_batch_s": marks[0][0] if marks else None, "first_epoch_s": first_epoch,
            "steady_examples_per_s": steady, "epochs_seen": marks[-1][1] / n_train if marks else 0.0}


def decode_limit(root: Path, n: int = 256, rounds: int = 5, warmup: int = 1) -> dict:
    """simplejpeg full decode alone, one thread, files in memory: images per CPU-second,
    the median of `rounds` after `warmup` rounds not counted. In two runs with no warm-up
    the rounds rose every time (777, 850, 1,004 and 790, 951, 992 images per CPU-second),
    so a cold first round pulled the limit down and the pipeline's share of it up."""
    import simplejpeg

    datas = [f.read_bytes() for f in sorted(root.rglob("*.JPEG"))[:n]]
    rates = []
    for _ in range(warmup + rounds):
        c = time.process_time()
        for d in datas:
            simplejpeg.decode_jpeg(d, colorspace="RGB")
        rates.append(len(datas) / (time.process_time() - c))
    counted = rates[warmup:]
    return {"images_per_cpu_s": float(np.median(counted)), "rounds": counted, "warmup_rounds": rates[:warmup],
            "files": len(datas)}


def tree_cpu_s() -> float:
    """CPU seconds of this process and its live children (the DataLoader's workers)."""
    import psutil

    total = 0.0
    me = psutil.Process()
    for p in [me, *me.children(recursive=True)]:
        try:
            t = p.cpu_times()
            total += t.user + t.system
        except psutil.NoSuchProcess:
            continue
    return total


def dataloader_epochs(root: str, batch: int, workers: int, seconds: float) -> dict:
    """torchvision's training transform on PIL, shuffled, from construction until
    `seconds` after the first batch (the subprocess arm)."""
    import torch
    from torchvision import datasets, transforms

    torch.manual_seed(SEED)
    t0 = time.perf_counter()
    tf = transforms.Compose([transforms.RandomResizedCrop(224), transforms.RandomHorizontalFlip(),
                             transforms.PILToTensor()])
    data = datasets.ImageFolder(root, tf)
    loader = torch.utils.data.DataLoader(data, batch_size=batch, shuffle=True, num_workers=workers,
                                         drop_last=True, persistent_workers=True)
    marks, n, cpu = [], 0, {}
    while not marks or marks[-1][0] < marks[0][0] + seconds:
        for x, _ in loader:
            n += len(x)
            marks.append((time.perf_counter() - t0, n))
            if n >= len(data) and "steady" not in cpu:
                cpu["steady"] = (tree_cpu_s(), n)
            if marks[-1][0] >= marks[0][0] + seconds:
                break
    out = epoch_figures(marks, len(data) // batch * batch)
    if "steady" in cpu and n > cpu["steady"][1]:
        out["images_per_cpu_s"] = (n - cpu["steady"][1]) / (tree_cpu_s() - cpu["steady"][0])
    return {**out, "workers": workers, "seed": SEED}


def echoray_epochs(cfg, seconds: float) -> dict:
    from echoray.bench_input import bench_input

    r = bench_input(cfg, seconds)
    n_train = r["train_examples"] // cfg.train.batch_size * cfg.train.batch_size
    return {**epoch_figures(r["marks"], n_train), "images_per_actor_cpu_s": r["images_per_actor_cpu_s"],
            "images_per_cpu_s": r["images_per_cpu_s"], "actors": r["actors"], "seed": cfg.seed}


def arm_order(arms: list[str], rep: int) -> list[str]:
    """Repeat `rep`'s order: the arms rotated by `rep`, so over len(arms) repeats each arm
    runs once in each place (first, on the machine the previous run left, and last)."""
    k = rep % len(arms)
    return arms[k:] + arms[:k]


def compare_epochs(root: Path, cfgs: dict, repeats: int, seconds: float) -> dict:
    """The DataLoader and one echoray arm per entry of `cfgs` (name -> config), interleaved
    (arm_order), each with its load at start and end."""
    import json

    runs: dict[str, list] = {"dataloader": [], **{name: [] for name in cfgs}}
    for rep in range(repeats):
        for arm in arm_order(list(runs), rep):
            load = settled_load()[0]  # the previous arm wound down (common.settled_load)
            if arm == "dataloader":
                out = subprocess.run([sys.executable, str(Path(__file__).parent / "input_pipeline.py"),
                                      "--dataloader-epochs", str(root), "--seconds", str(seconds)],
                                     capture_output=True, text=True, check=True)
                r = json.loads(out.stdout.strip().splitlines()[-1])
            else:
                r = echoray_epochs(cfgs[arm], seconds)
            r.update(load_avg_1m_start=load, load_avg_1m_end=settled_load()[0])  # after its own processes ended
            runs[arm].append(r)
            print("epochs", arm, json.dumps(r), flush=True)
    med = {arm: {k: float(np.median([x[k] for x in rs if x.get(k) is not None] or [np.nan]))
                 for k in ("first_batch_s", "first_epoch_s", "steady_examples_per_s", "images_per_cpu_s")}
           for arm, rs in runs.items()}
    return {"runs": runs, "median": med}
