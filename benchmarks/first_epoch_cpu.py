"""Where the CPU of a first epoch goes: echoray's pool against a DataLoader, by process.

Issue 30's whole-epoch goal (one epoch of the 2,000 ImageNet-like JPEGs, start-up
included, at least 1.3x a torch DataLoader's) is a CPU budget on 2 cores: an epoch cannot
end sooner than the machine's busy CPU over it divided by the cores. This measures that
CPU, machine-wide (/proc/stat) and per process (psutil), over each arm's timed window:

- `dataloader`: torchvision's transform on PIL, 2 workers, one epoch, in a subprocess
  timed from the DataLoader's construction (as benchmarks/input_epochs.py times it).
- `echoray`: `bench_input` for one epoch (the read plan of one epoch), timed from the
  start of iteration, Ray already up. The first
  repeat is the Ray session's first stream, which also starts Ray Data's own actors.
- `empty_pool`: the same 2-actor Ray Data pool (`ActorPoolStrategy(2, 2)`, one CPU each)
  mapping a class that only imports echoray's actor module, over 4 one-row blocks: what
  starting the pool costs with no decode at all.

The floor an arm's first epoch cannot beat is its busy CPU / cores; the figure to read is
how much of echoray's is start-up (the empty pool's) against the decode.

    .venv/bin/python benchmarks/first_epoch_cpu.py [--repeats 3] [--name first_epoch_cpu]
"""

from __future__ import annotations

import argparse
import collections
import json
import subprocess
import sys
import time

import psutil
from common import REPO, save, settled_load

FILES = REPO / "benchmarks" / "data" / "jpeg-2000"
RAY_DATA_ACTORS = ("_StatsActor", "_AutoscalingCoordinator", "ActorLocationTracker")


def group(pid: int, cmd: str, me: int, children: set[int]) -> str:
    """The process's part in a run: the pool's actors, Ray Data's own actors, the run's
    collector, this process (or the DataLoader's main process), its children (the
    DataLoader's workers), Ray's other processes, the rest of the machine."""
    if pid == me:
        return "this_process"
    if cmd.startswith("ray::MapWorker"):
        return "pool_actors"
    if any(a in cmd for a in RAY_DATA_ACTORS):
        return "ray_data_own_actors"
    if cmd.startswith("ray::RunCollector"):
        return "run_collector"
    if pid in children and "ray" not in cmd:
        return "children"
    if "ray" in cmd:
        return "ray_other"
    return "rest_of_machine"


def snapshot() -> dict[int, tuple[str, float]]:
    out = {}
    for p in psutil.process_iter(["cmdline", "name"]):
        try:
            t = p.cpu_times()
            out[p.pid] = (" ".join(p.info["cmdline"] or []) or p.info["name"], t.user + t.system)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return out


def machine_busy_s() -> float:
    t = psutil.cpu_times()
    return t.user + t.nice + t.system + t.irq + t.softirq


def by_group(before: dict, after: dict) -> dict[str, float]:
    """CPU-seconds each group used between two snapshots (a process that ended between
    them is lost: the machine-wide figure holds it)."""
    me = psutil.Process()
    children = {c.pid for c in me.children(recursive=True)}  # once, not per process
    out: dict[str, float] = collections.Counter()
    for pid, (cmd, cpu) in after.items():
        out[group(pid, cmd, me.pid, children)] += cpu - before.get(pid, (cmd, 0.0))[1]
    return {k: round(v, 3) for k, v in sorted(out.items())}


def windowed(fn) -> dict:
    """Runs fn() -> dict with its own first-epoch figure, and the CPU over its window."""
    s0, m0, w0 = snapshot(), machine_busy_s(), time.perf_counter()
    r = fn()
    s1, m1, w1 = snapshot(), machine_busy_s(), time.perf_counter()
    return {**r, "window_s": w1 - w0, "machine_busy_cpu_s": m1 - m0, "by_process_cpu_s": by_group(s0, s1)}


def dataloader_epoch(root: str) -> dict:
    """The subprocess: one DataLoader epoch from construction, with the machine's CPU
    over exactly that window (the imports before it are not timed, as Ray's start is not)."""
    import torch
    from torchvision import datasets, transforms

    torch.manual_seed(0)
    s0, m0, t0 = snapshot(), machine_busy_s(), time.perf_counter()
    tf = transforms.Compose([transforms.RandomResizedCrop(224), transforms.RandomHorizontalFlip(),
                             transforms.PILToTensor()])
    data = datasets.ImageFolder(root, tf)
    loader = torch.utils.data.DataLoader(data, batch_size=64, shuffle=True, num_workers=2, drop_last=True)
    n, first = 0, None
    for x, _ in loader:
        n += len(x)
        first = first or time.perf_counter() - t0
    epoch = time.perf_counter() - t0
    s1, m1 = snapshot(), machine_busy_s()
    return {"first_batch_s": first, "first_epoch_s": epoch, "examples": n, "window_s": epoch,
            "machine_busy_cpu_s": m1 - m0, "by_process_cpu_s": by_group(s0, s1)}


def echoray_epoch(cfg) -> dict:
    from echoray.bench_input import bench_input

    r = bench_input(cfg, None)
    n_train = r["train_examples"] // cfg.train.batch_size * cfg.train.batch_size
    first_epoch = next((t for t, n in r["marks"] if n >= n_train), None)
    return {"first_batch_s": r["first_batch_s"], "first_epoch_s": first_epoch, "examples": r["marks"][-1][1]}


def empty_pool() -> dict:
    import pyarrow as pa
    import ray.data
    from ray.data import ActorPoolStrategy

    class ImportOnly:  # defined here, so Ray pickles it by value (the workers do not import benchmarks/)
        """The empty pool's actor: echoray's actor module imported, rows passed through."""

        def __init__(self):
            import echoray.data.stages  # noqa: F401 - what a preprocessing actor imports

        def __call__(self, batch):
            return batch

    t0 = time.perf_counter()
    # from_blocks, as data/pipeline.py: ray.data.range's read tasks need a CPU each, which
    # the pool's two actors hold on 2 CPUs (it waited forever)
    ds = ray.data.from_blocks([pa.table({"id": [i]}) for i in range(4)]).map_batches(
        ImportOnly, batch_size=1, compute=ActorPoolStrategy(min_size=2, max_size=2), num_cpus=1.0)
    rows = sum(len(b["id"]) for b in ds.iter_batches(batch_size=1))
    return {"rows": rows, "first_epoch_s": time.perf_counter() - t0}


def summarize(runs: list[dict]) -> dict:
    import numpy as np

    later = runs[1:] or runs  # echoray's first repeat also starts Ray Data's own actors
    keys = ("first_epoch_s", "machine_busy_cpu_s")
    return {k: float(np.median([r[k] for r in later])) for k in keys}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--name", default="first_epoch_cpu")
    p.add_argument("--dataloader-epoch", metavar="ROOT", help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.dataloader_epoch:
        print(json.dumps(dataloader_epoch(a.dataloader_epoch)))
        return
    from input_pipeline import echoray_cfg

    from echoray.runtime.session import start_ray

    cfg = echoray_cfg(FILES)
    runs: dict[str, list] = {"dataloader": [], "echoray": [], "empty_pool": []}
    start_ray()
    for rep in range(a.repeats):
        for arm in runs:
            load = settled_load()[0]
            if arm == "dataloader":
                out = subprocess.run([sys.executable, __file__, "--dataloader-epoch", str(FILES)],
                                     capture_output=True, text=True, check=True)
                r = json.loads(out.stdout.strip().splitlines()[-1])
            else:
                r = windowed((lambda: echoray_epoch(cfg)) if arm == "echoray" else empty_pool)
            r.update(repeat=rep, load_avg_1m_start=load)
            runs[arm].append(r)
            print(arm, json.dumps(r), flush=True)
    med = {arm: summarize(rs) for arm, rs in runs.items()}
    cores = psutil.cpu_count()
    out = {"runs": runs, "median_after_first_repeat": med, "cores": cores,
           "floor_s": {arm: m["machine_busy_cpu_s"] / cores for arm, m in med.items()},
           "files": str(FILES.relative_to(REPO))}
    save(a.name, out, a, seeds=[0], repeats=a.repeats)
    print(json.dumps(med, indent=1))


if __name__ == "__main__":
    main()
