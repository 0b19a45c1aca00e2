"""The input pipeline at ImageNet scale, against what users would otherwise run.

0. single: decode + random-resized crop 224 + flip in one thread, torchvision/PIL vs
   echoray's decoder, same process, interleaved: the per-core cost of the work itself.
1. compare: the same two cores and the same work (JPEG decode, random-resized crop 224,
   flip, uint8 batches of 64) over an ImageNet-like folder (benchmarks/jpeg_set.py):
   torch DataLoader + torchvision ImageFolder with 2 workers (in a subprocess) vs
   `echoray bench-input` with 2 actors of 1 CPU (in process, one Ray for all runs);
   interleaved, order alternating per repeat, rates counted after the first batch.
2. concurrency: bench-input throughput vs reads in flight 1, 4, 16, 64 with
   20 ms of emulated latency per request (the image folder behind slow_store.py's store:
   a reader by import path, so the photos are decoded square, then cropped).
3. index: a 1,281,167-entry image_folder index: with ImageNet-form paths, build/publish
   time, pickled SourceIndex size before and after, memory an actor adds when it loads
   the file list (shared Arrow table vs the Python list the index used to carry); then
   the pipeline's peak memory (PSS of the whole process tree) while bench-input reads
   through a 1.28 M-entry index of the generated files.
4. actor (actor_cost.py): where one actor's CPU goes, part by part, in images per
   CPU-second: decode alone, + crop and resize, + flip, + stacking, the whole call at
   read_concurrency 1 and 16, the Arrow conversion (and whether it copies).
5. epochs (input_epochs.py): from nothing, first batch, first epoch with start-up and
   the steady rate over the epochs after it, images per CPU-second, echoray vs the
   DataLoader interleaved; decode_limit: simplejpeg's full decode alone on the same files
   (images per CPU-second), the ceiling for both.

    .venv/bin/python benchmarks/input_pipeline.py [--files 2000] [--repeats 2] [--parts single,actor,compare,concurrency,index,epochs] [--name input_pipeline]

Writes benchmarks/results/NAME.json (input_pipeline.json by default; with the commit, the
seeds, the load at start and end, every part and arm starting on a settled load). The
machine is shared: compare ratios.
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import subprocess
import sys
import time
from pathlib import Path

import actor_cost
import input_epochs
import numpy as np
from common import REPO, RESULTS, PeakMemory, load_avg, save, settled_load
from jpeg_set import jpeg_folder
from slow_store import overrides as slow_store

IMAGENET_TRAIN = 1_281_167


def dataloader_run(root: str, batch: int, workers: int, seconds: float) -> dict:
    """torchvision's reference training transform on PIL, what a DataLoader user runs;
    epochs until `seconds` after the first batch, rated like bench-input (steady_rate)."""
    import torch
    from torchvision import datasets, transforms

    from echoray.bench_input import steady_rate

    tf = transforms.Compose([transforms.RandomResizedCrop(224), transforms.RandomHorizontalFlip(),
                             transforms.PILToTensor()])
    loader = torch.utils.data.DataLoader(datasets.ImageFolder(root, tf), batch_size=batch, shuffle=True,
                                         num_workers=workers, drop_last=True, persistent_workers=True)
    t0 = time.perf_counter()
    marks, n = [], 0
    while not marks or marks[-1][0] - marks[0][0] < seconds:
        for x, _ in loader:
            assert x.dtype == torch.uint8 and tuple(x.shape[1:]) == (3, 224, 224)
            n += len(x)
            marks.append((time.perf_counter(), n))
            if marks[-1][0] - marks[0][0] >= seconds:
                break
    return {"examples_per_s": steady_rate(marks), "first_batch_s": marks[0][0] - t0, "workers": workers}


def single_thread(root: Path, n: int = 256, rounds: int = 3) -> dict:
    """Per-core cost without Ray or DataLoader: the same process decodes + crops + flips
    the same in-memory JPEGs both ways, interleaved (robust to a loaded machine)."""
    import io

    import torch
    from PIL import Image
    from torchvision import transforms

    from echoray.config import AugmentOp
    from echoray.data.full_crop import crop_decoder
    from echoray.seeds import mix

    torch.set_num_threads(1)
    datas = [f.read_bytes() for f in sorted(root.rglob("*.JPEG"))[:n]]
    tf = transforms.Compose([transforms.RandomResizedCrop(224), transforms.RandomHorizontalFlip(),
                             transforms.PILToTensor()])
    ops = [AugmentOp(op="random_resized_crop", size=224), AugmentOp(op="flip")]

    def torchvision_way():
        return torch.stack([tf(Image.open(io.BytesIO(d)).convert("RGB")) for d in datas])

    def echoray_way():  # as the actor does it: the crop and the flip made at decode (data/full_crop.py)
        keys = mix(1, np.arange(n))
        dec = crop_decoder(keys, ops[0], 3, ops[1])
        return np.stack([dec(i, d, "x") for i, d in enumerate(datas)])

    rates = {"torchvision_pil": [], "echoray": []}
    for _ in range(rounds):
        for name, fn in (("torchvision_pil", torchvision_way), ("echoray", echoray_way)):
            t = time.perf_counter()
            fn()
            rates[name].append(n / (time.perf_counter() - t))
    med = {k: float(np.median(v)) for k, v in rates.items()}
    print("single thread", med, flush=True)
    return {"images_per_s": med, "ratio": med["echoray"] / med["torchvision_pil"], "rounds": rates,
            "load_avg_1m": os.getloadavg()[0]}


def echoray_cfg(root: Path, *extra: str):
    from echoray.config_load import load_config

    return load_config(str(REPO / "pipelines" / "imagenet_resnet50.yaml"), [
        f"source.path={root}", "source.eval_path=null", "source.holdout_fraction=0.01",
        "preprocess.actors={min_size: 2, max_size: 2, num_cpus: 1.0}", "train.batch_size=64",
        *extra])  # no shuffle buffer, as the pipeline: an image folder's plan shuffles samples (data/plan.py)


# Arm names without "load" in them: a load checker reads a number under any key naming it
# as a load average ("dataloader_per_core": 281 was read as a load of 281).
ARMS = {  # name -> extra echoray overrides (None: the torch DataLoader)
    "torch_baseline": None,
    "echoray": [],  # local files: one read (so one decode) at a time per actor, the default
    # The default before this file's quiet run showed threads contending for the cores on
    # local files (16 reads in flight, what an object store gets; set through the emulated
    # store with no latency, slow_store.py read_concurrency).
    "echoray_read_concurrency_16": slow_store("image_folder", read_concurrency=16),
}


def compare(root: Path, repeats: int, seconds: float) -> dict:
    from echoray.bench_input import bench_input

    runs = {name: [] for name in ARMS}
    names = list(ARMS)
    for rep in range(repeats):
        order = names[rep % len(names):] + names[: rep % len(names)]  # rotate: drift hits every arm
        for what in order:
            load = settled_load()[0]  # the previous arm's processes wound down: no arm starts on another's load
            if ARMS[what] is None:
                out = subprocess.run([sys.executable, __file__, "--dataloader", str(root), "--seconds",
                                      str(seconds)], capture_output=True, text=True, check=True)
                r = json.loads(out.stdout.strip().splitlines()[-1])
            else:
                r = bench_input(echoray_cfg(root, *ARMS[what]), seconds)
                r = {k: r[k] for k in ("examples_per_s", "delivered_examples_per_s", "produced_examples_per_s",
                                       "first_batch_s", "actors", "cpus", "stages")}
            r["load_avg_1m"] = load
            runs[what].append(r)
            print(what, json.dumps({k: v for k, v in r.items() if k != "stages"}), flush=True)
    out = {"runs": runs}
    for name in names[1:]:
        ratios = [e["examples_per_s"] / d["examples_per_s"] for e, d in zip(runs[name], runs["torch_baseline"],
                                                                             strict=True)]
        out[f"{name}_vs_torch_baseline"] = {"per_repeat": ratios, "median": float(np.median(ratios))}
    for name in names:
        out[f"{name}_per_core"] = float(np.median([r["examples_per_s"] for r in runs[name]]) / 2)
    return out


def concurrency(root: Path, seconds: float) -> dict:
    from echoray.bench_input import bench_input

    out = {}
    for c in (1, 4, 16, 64):
        settled_load()
        r = bench_input(echoray_cfg(root, *slow_store("image_folder", latency_ms=20, read_concurrency=c)), seconds)
        out[c] = {"examples_per_s": r["examples_per_s"], "load_avg_1m": os.getloadavg()[0]}
        print("read_concurrency", c, out[c], flush=True)
    return out


def imagenet_paths(n: int = IMAGENET_TRAIN) -> tuple[list[str], np.ndarray]:
    """Paths of ImageNet's form and length: /data/imagenet/train/n01440764/n01440764_10026.JPEG."""
    labels = np.arange(n) % 1000
    return [f"/data/imagenet/train/n{c + 1440764:08d}/n{c + 1440764:08d}_{i}.JPEG"
            for i, c in enumerate(labels.tolist())], labels


def readable_index(root: Path):
    """A 1,281,167-entry index the pipeline can really read: entry i names generated file
    i % n (the paths repeat; their count is ImageNet's)."""
    from echoray.data.sources.base import SourceIndex
    from echoray.data.sources.file_table import FileTable

    files = sorted(str(p) for p in root.rglob("*.JPEG"))
    n = IMAGENET_TRAIN
    labels = np.asarray([int(Path(p).parent.name[1:]) for p in files])[np.arange(n) % len(files)]
    table = FileTable(str(root), [files[i % len(files)] for i in range(n)], labels)
    return SourceIndex(kind="image_folder", num_classes=int(labels.max()) + 1, train_ids=np.arange(n),
                       eval_ids=np.arange(1000), image_size=256, channels=3,
                       details={"uri": str(root), "eval_uri": str(root), "classes": [],
                                "train": table, "eval": table},
                       read_concurrency=16, shuffled_reads=True)


def _actor_memory(payload_kind: str, payload) -> dict:
    import psutil
    import ray

    @ray.remote(num_cpus=0)
    class Holder:
        def measure(self, payload):
            import pyarrow as pa

            pa.table({"a": [1]}).take(pa.array([0]))  # library warm-up is not the index's memory
            p = psutil.Process()
            before = p.memory_full_info()
            t = time.perf_counter()
            if payload_kind == "table":
                payload.take(np.arange(0, IMAGENET_TRAIN, 997))
            else:
                payload = pickle.loads(payload)  # what unpickling the old SourceIndex did
                _ = [payload[0][i] for i in range(0, IMAGENET_TRAIN, 997)]
            load_s = time.perf_counter() - t
            after = p.memory_full_info()
            keep = payload  # noqa: F841 - held while measuring
            return {"uss_added_mb": (after.uss - before.uss) / 2**20, "rss_added_mb": (after.rss - before.rss) / 2**20,
                    "pss_added_mb": (after.pss - before.pss) / 2**20, "load_s": load_s}

    h = Holder.remote()
    r = ray.get(h.measure.remote(payload))
    ray.kill(h)
    return r


def index_part(root: Path, seconds: float) -> dict:
    from echoray.bench_input import bench_input
    from echoray.data.sources.file_table import FileTable, publish_index

    t = time.perf_counter()
    paths, labels = imagenet_paths()
    table = FileTable("/data/imagenet/train", paths, labels)
    build_s = time.perf_counter() - t
    old_pickle = pickle.dumps((paths, labels))  # what the SourceIndex used to carry
    del paths
    idx = readable_index(root)
    idx.details["train"] = table
    t = time.perf_counter()
    shared = publish_index(idx)
    publish_s = time.perf_counter() - t
    out = {
        "entries": IMAGENET_TRAIN, "build_table_s": build_s, "publish_s": publish_s,
        "table_mb": table.table().nbytes / 2**20,
        "pickled_paths_list_mb": len(old_pickle) / 2**20,
        "pickled_index_mb": len(pickle.dumps(shared)) / 2**20,
        "pickled_ids_mb": (shared.train_ids.nbytes + shared.eval_ids.nbytes) / 2**20,
        "actor_with_table": _actor_memory("table", shared.details["train"]),
        "actor_with_list": _actor_memory("list", old_pickle),
    }
    del old_pickle, table, idx, shared
    for name, make in (("pipeline_own_index", lambda: None),  # the folder's own index: the baseline
                       ("pipeline", lambda: publish_index(readable_index(root)))):
        idx = make()  # built before the window: its transient Python path list is not the pipeline's
        with PeakMemory() as mem:
            t = time.perf_counter()
            r = bench_input(echoray_cfg(root), seconds, idx=idx)
            total_s = time.perf_counter() - t
        del idx
        out[name] = {"examples_per_s": r["examples_per_s"], "first_batch_s": r["first_batch_s"],
                     "start_to_end_s": total_s, "peak_pss_gib": mem.peak / 2**30,
                     "load_avg_1m": os.getloadavg()[0]}
    print("index", json.dumps(out, default=float), flush=True)
    return out


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--files", type=int, default=2000)
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--seconds", type=float, default=30.0, help="measured time per run after its first batch")
    p.add_argument("--parts", default="single,actor,compare,concurrency,index,epochs")
    p.add_argument("--name", default="input_pipeline",
                   help="results file stem; a run of some parts keeps the others' figures from the same file")
    p.add_argument("--dataloader", metavar="ROOT", help=argparse.SUPPRESS)
    p.add_argument("--dataloader-epochs", metavar="ROOT", help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.dataloader:
        print(json.dumps(dataloader_run(a.dataloader, 64, 2, a.seconds)))
        return
    if a.dataloader_epochs:
        print(json.dumps(input_epochs.dataloader_epochs(a.dataloader_epochs, 64, 2, a.seconds)))
        return
    from echoray.runtime.session import start_ray

    load_start = settled_load()  # a previous benchmark's processes wound down
    root = jpeg_folder(a.files)
    sizes = [f.stat().st_size for f in root.rglob("*.JPEG")]
    os.environ.setdefault("RAY_TRAIN_V2_ENABLED", "1")
    start_ray()
    result = {"files": len(sizes), "mean_kb": float(np.mean(sizes) / 1e3), "cpus": os.cpu_count(),
              "seeds": {"echoray": echoray_cfg(root).seed, "dataloader": input_epochs.SEED, "jpeg_set": 0}}
    parts = a.parts.split(",")

    def part(fn, *args) -> dict:  # each part records its own load: a later run of other parts keeps it
        load0 = settled_load()  # the previous part's processes wound down (common.settled_load)
        out = fn(*args)
        return {**out, "load_avg": load_avg(load0, settled_load())}

    if "single" in parts:
        result["single_thread"] = part(single_thread, root)
    if "actor" in parts:
        result["actor_cost"] = part(actor_cost.actor_cost, root)
    if "compare" in parts:
        result["compare"] = part(compare, root, a.repeats, a.seconds)
    if "concurrency" in parts:
        result["read_concurrency_20ms"] = part(concurrency, root, a.seconds)
    if "index" in parts:
        result["index_1_28M"] = part(index_part, root, a.seconds)
    if "decode_limit" in parts or "epochs" in parts:
        result["decode_limit"] = part(input_epochs.decode_limit, root)
    if "epochs" in parts:
        result["epochs"] = part(input_epochs.compare_epochs, root, {"echoray": echoray_cfg(root)}, a.repeats,
                                a.seconds)
    previous = RESULTS / f"{a.name}.json"  # a run of some parts keeps the others' figures
    old = json.loads(previous.read_text()) if previous.exists() else {}
    old = {k: v for k, v in old.items() if k not in ("load_avg_start", "load_avg_end", "load_avg", "provenance")}
    print(save(a.name, {**old, **result}, a, start_load=load_start, end_load=settled_load()))


if __name__ == "__main__":
    main()
