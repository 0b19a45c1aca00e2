"""One search, shared against separate preprocessing streams, on the same CPUs (issue 25).

A search of `--trials` trials at `--concurrency` (8 at 4) over an input-bound pipeline:
ImageNet-like JPEGs (benchmarks/jpeg_set.py's photo-like images, 500x375, ~100 KB,
with a class tint so a small CNN can learn them) decoded at the DCT scale of a
random-resized crop, then flipped, in the preprocessing actors; a small CNN trains on
the 64-pixel crops (`--width`, 8 by default, and `--channels-last` set what a trial's
step costs). Every stream has two actors (a separate trial's pool and the shared hub's
alike; 0.125 logical CPU each, so 4 separate trials fit 2 CPUs as 4 shared ones do).
The search varies optimizer.lr and echo.factor (1 or 2, echoed on each trial's
worker when shared). Run with `search.share_preprocessing` true and false,
alternating, for the files on local disk and in a bucket of the local S3 server
(tests/s3_server.py, its own process). Per search:

- wall_s: the search's wall time (api.tune, Ray already up);
- preprocess_cpu_s: CPU-seconds (user + system) of the preprocessing actors' processes
  (title with "Preprocess"), sampled every 0.5 s from /proc (a process's time after its
  last sample is lost: at most 0.5 s each); hub_cpu_s: the StreamHub processes' (the
  shared stream's fan-out);
- rows_read and bytes_read: rows the actors read (separate: the trials' source_reads;
  shared: the hub's produced rows and those its actors had read ahead when it stopped,
  read_unused_rows; calls cut part-way, calls_cut, are not counted) and those rows x
  the set's mean JPEG size; for local
  files also read_chars_local: the bytes the actor processes read through read(2);
- each trial's fresh examples to target, target reached, its best held-out accuracy
  (trial_results: per search point, shared against the separate runs' spread), its own
  wall time;
- cpu_split: CPU-seconds of the preprocessing actors, the hub, the trials' processes
  (Tune's trainables, each training in process) and their runs' collectors, the rest of
  the machine's busy time (the Tune driver, Ray's own processes, and for s3 the S3
  server's process) and the cores' idle time (preprocess and hub repeat
  preprocess_cpu_s and hub_cpu_s, which earlier results files have alone); busy_cpu_ratio, separate streams' busy CPU over the shared search's, is the
  wall-time ratio sharing could give on a saturated machine: what the trials do
  themselves (train, import torch, talk to Ray) is not shared;
- object store: the high-water mark of the objects Ray reports (ray.util.state
  list_objects, every 2 s) and, shared, the window's peak held bytes and rows against
  its bound in rows.
- held_out_rows_read: held-out images read and decoded (shared: once per group, by its
  hub; separate: once per trial).

Every pair runs at the pipeline's seed 0 unless `--seed-per-pair` gives pair i seed i
(its own search points and data order): a separate stream reproduces exactly, so pairs at
one seed repeat one separate draw.

    .venv/bin/python benchmarks/shared_stream.py [--files 2000] [--trials 8] [--concurrency 4] [--where local,s3] [--pairs 1] [--seed-per-pair] [--target 0.9] [--width 8] [--channels-last] [--name shared_stream]
    .venv/bin/python benchmarks/shared_stream.py --smoke   # 200 files, 4 trials at 2, local only

Writes benchmarks/results/NAME.json (shared_stream.json by default; common.save; ECHORAY_BENCH_RESULTS elsewhere).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
import psutil
import yaml
from common import REPO, save, settled_load
from jpeg_set import jpeg_folder

sys.path.insert(0, str(REPO / "tests"))
from s3_server import S3Server  # noqa: E402 - the tests' S3 server process

CLASSES = 4
TINTS = np.array([[40, -40, 0], [-40, 40, 0], [0, -40, 40], [40, 40, -40]], np.float32)


def tinted_folder(n_files: int, seed: int = 0) -> Path:
    """DATA/jpeg-tinted-N/<class>/<i>.JPEG: photo-like images, each class its colour tint."""
    return jpeg_folder(n_files, CLASSES, seed, tints=TINTS)


def pipeline_tree(args, data: str, shared: bool, seed: int = 0) -> dict:
    """The benchmark's pipeline, as a YAML tree."""
    return {
        "name": f"shared-stream-{'shared' if shared else 'separate'}", "seed": seed,
        "source": {"kind": "image_folder", "path": data, "image_size": 64, "chunk_size": 16,
                   "holdout_fraction": 0.1},
        "preprocess": {"augment": {"on": "cpu", "ops": [{"op": "random_resized_crop", "size": 64,
                                                          "scale": [0.35, 1.0]}, {"op": "flip"}]},
                       "batch_size": 64, "actors": {"min_size": 2, "max_size": 2, "num_cpus": 0.125}},
        "echo": {"stage": "after_augment", "factor": 1.0, "shuffle_buffer": 256},
        "model": {"name": "small_cnn", "width": args.width},
        "optimizer": {"name": "sgd", "lr": 0.05, "momentum": 0.9},
        "train": {"batch_size": 64, "max_epochs": args.epochs, "target": args.target, "stall_timeout_s": 600,
                  "channels_last": args.channels_last},
        "scaling": {"num_workers": 1, "cpus_per_worker": 0.25, "use_gpu": False},
        "tracking": {"experiment": "shared-stream-bench"},
        "search": {"trials": args.trials, "repeats": 1, "max_concurrent": args.concurrency,
                   "share_preprocessing": shared,
                   "space": {"optimizer.lr": {"low": 0.01, "high": 0.3, "scale": "log"},
                             "echo.factor": {"choices": [1.0, 2.0]}}},
    }


def pipeline_file(tmp: Path, args, data: str, shared: bool, seed: int = 0) -> Path:
    tree = pipeline_tree(args, data, shared, seed)
    path = tmp / f"{tree['name']}.yaml"
    path.write_text(yaml.safe_dump(tree))
    return path


# Which processes count as what, by their title (Ray names an actor's process after its class):
# the trials' own processes (Tune's function trainable, each training in process) and their
# runs' collectors are counted too, for the split of the search's CPU (cpu_split).
MARKS = {"preprocess": ("Preprocess", "MapWorker"), "hub": ("StreamHub",), "trial": ("ImplicitFunc",),
         "collector": ("RunCollector",)}


def eval_images(args, data: Path) -> int:
    """The held-out images of the benchmark's source (pipeline_tree's split)."""
    from echoray.config import SourceConfig
    from echoray.data.sources import index_source

    return len(index_source(SourceConfig(**pipeline_tree(args, str(data), True)["source"])).eval_ids)


def machine_busy_s() -> float:
    """CPU-seconds the whole machine has been busy (all cores: not idle, not waiting on I/O)."""
    t = psutil.cpu_times()
    return sum(t) - t.idle - getattr(t, "iowait", 0.0)


class Sampler:
    """CPU time and read(2) bytes of the processes MARKS names, and the object store's
    reported bytes, sampled in the background."""

    def __init__(self, interval_s: float = 0.5):
        self.interval_s = interval_s
        self.titles: set[str] = set()
        self.base: dict[int, tuple[float, int]] = {}  # pid -> (cpu, read chars) before the search
        self.last: dict[int, tuple[str, float, int]] = {}
        self.store_peak, self.store_error = 0, None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _scan(self) -> dict[int, tuple[str, float, int]]:
        out = {}
        for p in psutil.process_iter(["pid", "cmdline"]):
            title = " ".join(p.info["cmdline"] or [])
            mark = next((k for k, words in MARKS.items() if any(w in title for w in words)), None)
            if mark is None:
                continue
            self.titles.add(title[:80])
            try:
                t = p.cpu_times()
                out[p.pid] = (mark, t.user + t.system, p.io_counters().read_chars)
            except (psutil.NoSuchProcess, psutil.AccessDenied):
                pass
        return out

    def _store_bytes(self) -> int | None:
        from ray.util.state import list_objects

        try:
            return sum(o.object_size or 0 for o in list_objects(limit=10_000, raise_on_missing_output=False))
        except Exception as exc:  # noqa: BLE001 - recorded, not fatal
            self.store_error = f"{type(exc).__name__}: {exc}"
            return None

    def _run(self) -> None:
        k = 0
        while not self._stop.is_set():
            self.last.update(self._scan())
            if k % max(1, round(2.0 / self.interval_s)) == 0:
                self.store_peak = max(self.store_peak, self._store_bytes() or 0)
            k += 1
            self._stop.wait(self.interval_s)

    def __enter__(self) -> Sampler:
        self.base = {pid: (cpu, rc) for pid, (_, cpu, rc) in self._scan().items()}
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        self.last.update(self._scan())

    def totals(self) -> dict[str, dict[str, float]]:
        out: dict[str, dict[str, float]] = {m: {"cpu_s": 0.0, "read_chars": 0, "processes": 0} for m in MARKS}
        for pid, (mark, cpu, rc) in self.last.items():
            b_cpu, b_rc = self.base.get(pid, (0.0, 0))
            out[mark]["cpu_s"] += cpu - b_cpu
            out[mark]["read_chars"] += rc - b_rc
            out[mark]["processes"] += 1
        return out


def pair_seed(args, i: int) -> int:
    """The pipeline's seed (the search's points and the data order) of pair i."""
    return i if args.seed_per_pair else 0


def held_out_rows(report: dict | None, trials: list[dict], n_eval: int) -> int:
    """Held-out images read and decoded by the search: once per shared group and crop size
    (the hub's record), else once per trial (each run keeps its decoded set)."""
    if report is None:
        return n_eval * len(trials)
    return sum(h["rows"] for g in report["groups"] for h in g.get("held_out", []))


def one_search(where: str, data: str, shared: bool, args, tmp: Path, mean_file_bytes: float, i: int,
               n_eval: int) -> dict:
    import echoray.api as api

    seed = pair_seed(args, i)
    path = pipeline_file(tmp, args, data, shared, seed)
    out = tmp / f"{where}-{'shared' if shared else 'separate'}-{i}"
    with Sampler() as sampler:
        t0, busy0 = time.perf_counter(), machine_busy_s()
        summary = api.tune(path, [f"tracking.uri=sqlite:///{tmp / 'mlflow.db'}"], trials=args.trials, repeats=1,
                           out=out)
        wall, busy = time.perf_counter() - t0, machine_busy_s() - busy0
    procs = sampler.totals()
    trials = [json.loads(p.read_text()) for p in sorted((out / "trials").glob("*/summary.json"))]
    report = json.loads((out / "share_streams.json").read_text()) if (out / "share_streams.json").exists() else None
    rows_read = (sum(g["produced_rows"] + g["read_unused_rows"] for g in report["groups"]) if report
                 else sum(t["source_reads"] or 0 for t in trials))
    rec = {
        "where": where, "shared": shared, "seed": seed, "wall_s": round(wall, 2), "concurrency": summary["concurrency"],
        "preprocess_cpu_s": round(procs["preprocess"]["cpu_s"], 2),
        "preprocess_processes": procs["preprocess"]["processes"], "hub_cpu_s": round(procs["hub"]["cpu_s"], 2),
        # where the search's CPU went: what sharing can remove (preprocessing) and what it cannot
        "cpu_split": cpu_split(procs, busy, wall),
        "process_titles": sorted(sampler.titles),
        "rows_read": rows_read, "bytes_read": int(rows_read * mean_file_bytes),
        "held_out_rows_read": held_out_rows(report, trials, n_eval),
        "read_chars_local": procs["preprocess"]["read_chars"] if where == "local" else None,
        "trials": [{"trial_key": t["trial_key"], "params": t["params"], "status": t["status"],
                    "fresh_examples": t["fresh_examples"], "fresh_examples_to_target": t["fresh_examples_to_target"],
                    "best_metric": t.get("best_metric", t.get("best_accuracy"))}
                   for t in summary["trials"]],
        "trial_wall_s": [round(t["wall_s"], 1) for t in trials],
        "object_store_peak_bytes": sampler.store_peak, "object_store_error": sampler.store_error,
    }
    if report:
        rec["windows"] = [{"group": g["group"], "bound_rows": g["window_rows"], "peak_rows": g["window"]["peak_rows"],
                           "peak_bytes": g["window"]["peak_bytes"], "produced_rows": g["produced_rows"],
                           "starts": {c["trial"]: c["start_row"] for c in g["consumers"]},
                           "producer_wait_s": g["producer_wait_s"], "read_unused_rows": g["read_unused_rows"],
                           "calls_cut": g["calls_cut"]} for g in report["groups"]]
    print(json.dumps({k: v for k, v in rec.items() if k != "trials"}), flush=True)
    return rec


def cpu_split(procs: dict, busy_s: float, wall_s: float) -> dict:
    """CPU-seconds by kind of process, the rest of the machine's busy time (the Tune driver,
    Ray's own processes, trial processes not yet titled, the S3 server's process when the
    files are in its bucket), and the cores' idle time."""
    own = {k: round(v["cpu_s"], 1) for k, v in procs.items()}
    return {**own, "other": round(busy_s - sum(own.values()), 1), "machine_busy": round(busy_s, 1),
            "idle": round(wall_s * psutil.cpu_count() - busy_s, 1)}


def sharing_bound(split_shared: dict, split_separate: dict) -> float | None:
    """The wall-time ratio sharing could give on a saturated machine: separate streams'
    busy CPU over the shared search's (the trials' own work, Ray's and Tune's unchanged)."""
    if not split_shared or not split_separate or not split_shared["machine_busy"]:
        return None
    return split_separate["machine_busy"] / split_shared["machine_busy"]


def compare(runs: list[dict], where: str) -> dict:
    """Median of shared / separate per figure, and the trials' fresh examples to target."""
    def med(shared: bool, key: str):
        vals = [r[key] for r in runs if r["where"] == where and r["shared"] is shared and r[key] is not None]
        return statistics.median(vals) if vals else None

    out = {}
    for key in ("wall_s", "preprocess_cpu_s", "rows_read", "bytes_read", "read_chars_local", "held_out_rows_read"):
        s, p = med(True, key), med(False, key)
        out[key] = {"shared": s, "separate": p, "shared_over_separate": s / p if s is not None and p else None}
    for shared in (True, False):
        fe = [t["fresh_examples_to_target"] for r in runs if r["where"] == where and r["shared"] is shared
              for t in r["trials"] if t["fresh_examples_to_target"] is not None]
        out[f"fresh_to_target_{'shared' if shared else 'separate'}"] = (
            {"n": len(fe), "min": min(fe), "median": statistics.median(fe), "max": max(fe)} if fe else {"n": 0})
    out["trial_results"] = trial_results(runs, where)
    splits = {sh: [r["cpu_split"] for r in runs if r["where"] == where and r["shared"] is sh and r.get("cpu_split")]
              for sh in (True, False)}
    out["cpu_split"] = {("shared" if sh else "separate"): {k: statistics.median(x[k] for x in v) for k in v[0]}
                        for sh, v in splits.items() if v}
    out["busy_cpu_ratio"] = sharing_bound(out["cpu_split"].get("shared"), out["cpu_split"].get("separate"))
    return out


def trial_results(runs: list[dict], where: str) -> dict:
    """Each search point's best held-out metric, shared against separate over the pairs (the
    same search seed: the same points; a point is keyed by its pair's seed and its trial
    key): per point the separate runs' [min, max] and the
    shared runs' values, and how many shared values fall inside the separate spread widened
    by the largest spread any point has between two separate runs (one pair gives no spread
    of its own)."""
    by: dict[str, dict[bool, list[float]]] = {}
    for r in runs:
        if r["where"] != where:
            continue
        for t in r["trials"]:
            if t.get("best_metric") is not None:
                key = f"{r.get('seed', 0)}/{t['trial_key']}"
                by.setdefault(key, {True: [], False: []})[r["shared"]].append(t["best_metric"])
    noise = max((max(v[False]) - min(v[False]) for v in by.values() if len(v[False]) > 1), default=0.0)
    points, inside, n = {}, 0, 0
    for key, v in sorted(by.items()):
        if not v[False] or not v[True]:
            continue
        lo, hi = min(v[False]) - noise, max(v[False]) + noise
        k = sum(lo <= x <= hi for x in v[True])
        inside, n = inside + k, n + len(v[True])
        points[key] = {"separate": v[False], "shared": v[True], "shared_inside": k}
    mean = {s: statistics.mean(x for v in by.values() for x in v[s]) if any(v[s] for v in by.values()) else None
            for s in (True, False)}
    return {"points": points, "separate_noise": noise, "shared_inside": inside, "shared_values": n,
            "mean_best_shared": mean[True], "mean_best_separate": mean[False]}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--files", type=int, default=2000)
    ap.add_argument("--trials", type=int, default=8)
    ap.add_argument("--concurrency", type=int, default=4)
    ap.add_argument("--epochs", type=int, default=6)
    ap.add_argument("--target", type=float, default=0.9)
    ap.add_argument("--channels-last", action="store_true",
                    help="train.channels_last: true for the trials (small_cnn width 8 steps 1.45-1.61x as fast on 1 thread)")
    ap.add_argument("--width", type=int, default=8,
                    help="small_cnn's width: the trials' training CPU (2: a third of 8's per example)")
    ap.add_argument("--pairs", type=int, default=1, help="shared/separate pairs per store, alternating")
    ap.add_argument("--seed-per-pair", action="store_true",
                    help="pair i's pipeline seed is i (its own search points and data order) instead of 0 for all")
    ap.add_argument("--where", default="local,s3")
    ap.add_argument("--smoke", action="store_true", help="200 files, 4 trials at 2, 2 epochs, local only")
    ap.add_argument("--name", default="shared_stream", help="results/NAME.json")
    args = ap.parse_args()
    if args.smoke:
        args.files, args.trials, args.concurrency, args.epochs, args.where = 200, 4, 2, 2, "local"
    start_load = settled_load()  # nothing of this run is up yet: the machine's own load
    wheres = args.where.split(",")
    data = tinted_folder(args.files)
    mean_file_bytes = float(np.mean([p.stat().st_size for p in data.rglob("*.JPEG")]))
    n_eval = eval_images(args, data)
    tmp = Path(tempfile.mkdtemp(prefix="sharedbench"))
    server = S3Server(tmp / "moto.log") if "s3" in wheres else None
    import ray

    try:
        sources = {"local": str(data)}
        if server is not None:
            os.environ.update(server.env)  # before Ray starts: its workers inherit them
            sources["s3"] = server.upload(data, f"{server.make_bucket('bench')}/jpeg")
        from echoray.runtime.session import start_ray

        start_ray()
        runs = []
        for i in range(args.pairs):
            for where in wheres:
                order = (True, False) if i % 2 == 0 else (False, True)
                runs.extend(one_search(where, sources[where], shared, args, tmp, mean_file_bytes, i, n_eval)
                            for shared in order)
    finally:
        ray.shutdown()
        if server is not None:
            server.stop()
    out = {"figures": {w: compare(runs, w) for w in wheres}, "runs": runs, "files": args.files,
           "mean_file_bytes": mean_file_bytes, "smoke": args.smoke}
    print(json.dumps(out["figures"], indent=2))
    # the end's load once this run's own Ray has shut down (its actors are not other work)
    print(save(args.name, out, args, start_load=start_load, end_load=settled_load(),
               seeds=sorted({pair_seed(args, i) for i in range(args.pairs)}),
               repeats=args.pairs))


if __name__ == "__main__":
    main()
