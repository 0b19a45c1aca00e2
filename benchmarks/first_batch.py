"""Where the time before the first batch goes, with timestamps (issue 30).

Two cases, each from a Ray that is already up, `--repeats` times, one after another:

- `stream`: the ImageNet-like JPEG set (benchmarks/jpeg_set.py) through exactly the
  Dataset `echoray train` builds (data/pipeline.py build_train_dataset, the ImageNet
  pipeline with 2 actors of 1 CPU, batches of 256) and a worker's `iter_batches`: the
  Dataset built, iteration asked, each actor's constructor (Ray's timeline: its start
  and end), the first actor call (start, end), the first batch in the consumer's hands.
- `digits_store`: digits behind the emulated store (27.8 ms per 16-sample request,
  one read in flight, a 256-row shuffle buffer) with 40 epochs planned, the source
  reading ahead as far as Ray Data lets it: a whole `echoray train` in this process,
  stopped at its first evaluation (train.target 0.1); its summary's first read and first
  step and the actor's constructor, from the run's start. This process started Ray, so
  the runs train in a Ray Train worker group; --in-process trains them here, as
  `echoray train` does on the local Ray it starts.

    .venv/bin/python benchmarks/first_batch.py [--files 2000] [--repeats 3] [--parts stream,digits_store]
        [--batch 256] [--in-process] [--name first_batch]

Writes benchmarks/results/NAME.json through common.save (load at start and end).
"""

from __future__ import annotations

import argparse
import json
import time

import common  # noqa: F401 - first: it records the load at the benchmark's start
import numpy as np
from common import load_avg, save, settled_load, train_in_process
from jpeg_set import jpeg_folder
from slow_store import overrides as slow_store

MAP_WORKER = "MapWorker(MapBatches(Preprocess))"
DIGITS_STORE = ["source.chunk_size=16", "train.evals_per_epoch=4", "echo.max_factor=8.0", "scaling.cpus_per_worker=1",
                "echo.shuffle_buffer=256", *slow_store("digits", latency_ms=27.8, read_concurrency=1), "train.max_epochs=40",
                "train.target=0.1"]


def actor_events(since: float) -> dict[str, list]:
    """Ray's timeline (a public API) from `since` on, in seconds since it: the pool's actor
    constructors and calls ((start, end) in start order, by method) and every other
    actor's constructor ((class, start, end): Ray Data's own actors start with the first
    Dataset a process runs)."""
    import ray

    out: dict[str, list] = {"__init__": [], "submit": [], "other_actors": []}
    for e in ray.timeline():
        cat = str(e.get("cat", ""))
        if e.get("ph") != "X" or not cat.startswith("task::"):
            continue
        start = e["ts"] / 1e6 - since
        if start < 0:
            continue
        span = (start, start + e["dur"] / 1e6)
        name, _, method = cat.removeprefix("task::").rpartition(".")
        if name == MAP_WORKER and method in ("__init__", "submit"):
            out[method].append(span)
        elif method == "__init__":
            out["other_actors"].append((name, *span))
    return {k: sorted(v, key=lambda x: x[-2]) for k, v in out.items()}


def stream_run(root, batch: int = 256) -> dict:
    """One stream from nothing (no pool yet): the phases in seconds since the call."""
    from input_pipeline import echoray_cfg

    from echoray.data.pipeline import build_train_dataset
    from echoray.data.sources import index_source
    from echoray.data.sources.file_table import publish_index
    from echoray.train.early_stream import batch_stream

    cfg = echoray_cfg(root, f"train.batch_size={batch}")
    idx = publish_index(index_source(cfg.source))
    load = settled_load()[0]  # the previous run's pool has wound down
    t0 = time.time()
    ds = build_train_dataset(cfg, idx)
    built = time.time() - t0
    it = iter(batch_stream(ds, cfg, 0))
    asked = time.time() - t0
    first = next(it)
    got = time.time() - t0
    n = len(first["sample_id"])
    second = next(it)
    got2 = time.time() - t0
    del it, ds
    ev = actor_events(t0)
    inits, calls = ev["__init__"], ev["submit"]
    return {"built_s": built, "iteration_asked_s": asked, "other_actors": ev["other_actors"],
            "actor_init_s": inits, "first_call_s": calls[0] if calls else None,
            "first_batch_s": got, "first_batch_rows": n, "second_batch_s": got2,
            "second_batch_rows": len(second["sample_id"]),
            "first_batch_after_first_actor_ready_s": got - inits[0][1] if inits else None,
            "load_avg_1m": load}


# The runs' key in the results file: earlier files also hold a "paced" arm (source.max_rows_ahead,
# since removed), and benchmarks/side_by_side.py compares this file across commits by key.
ARM = "unpaced"


def digits_store_run(seed: int, trainer: list[str] = ()) -> dict:
    load = settled_load()[0]  # the 1-min load this run starts on, once the previous run's Ray Train has gone
    t0 = time.time()
    summary, _ = train_in_process([*DIGITS_STORE, *trainer, f"seed={seed}"],
                                  f"first-batch-digits-{seed}")
    ev = actor_events(t0)
    return {"time_to_first_read_s": summary["time_to_first_read_s"],
            "time_to_first_step_s": summary["time_to_first_step_s"],
            "actor_init_s": ev["__init__"], "first_call_s": ev["submit"][0] if ev["submit"] else None,
            "other_actors": ev["other_actors"], "wall_s": summary["wall_s"], "load_avg_1m": load}


def medians(runs: list[dict], keys: tuple[str, ...]) -> dict:
    return {k: float(np.median([r[k] for r in runs if r.get(k) is not None] or [np.nan])) for k in keys}


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--files", type=int, default=2000)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--parts", default="stream,digits_store")
    p.add_argument("--batch", type=int, default=256, help="the stream's batch size")
    p.add_argument("--name", default="first_batch", help="results file name (benchmarks/results/NAME.json)")
    p.add_argument("--in-process", action="store_true",
                   help="digits_store trains in this process (as `echoray train` on the local Ray it starts), "
                        "not in a Ray Train worker group (this process started Ray, so auto picks that)")
    a = p.parse_args()
    from echoray.runtime.session import quiet_data, start_ray

    start_ray()
    quiet_data()
    parts = a.parts.split(",")
    result: dict = {"repeats": a.repeats}
    if "stream" in parts:
        root = jpeg_folder(a.files)
        load0 = settled_load()
        runs = []
        for _ in range(a.repeats):
            runs.append(stream_run(root, a.batch))
            print("stream", json.dumps(runs[-1]), flush=True)
        result["stream"] = {"files": a.files, "batch": a.batch, "runs": runs, "load_avg": load_avg(load0, settled_load()),
                            # the first run of a process also starts Ray Data's own actors
                            "cold_first_batch_s": runs[0]["first_batch_s"],
                            "median": medians(runs, ("built_s", "first_batch_s", "second_batch_s",
                                                     "first_batch_after_first_actor_ready_s")),
                            "median_warm": medians(runs[1:], ("first_batch_s",
                                                              "first_batch_after_first_actor_ready_s"))}
    if "digits_store" in parts:
        load0 = settled_load()
        trainer = ["scaling.local_mode=true"] if a.in_process else []
        runs: dict[str, list] = {ARM: []}
        for seed in range(a.repeats):
            runs[ARM].append(digits_store_run(seed, trainer))
            print("digits_store", json.dumps(runs[ARM][-1]), flush=True)
        result["digits_store"] = {"overrides": [*DIGITS_STORE, *trainer], "runs": runs,
                                  "load_avg": load_avg(load0, settled_load()),
                                  "median": {k: medians(v, ("time_to_first_read_s", "time_to_first_step_s"))
                                             for k, v in runs.items()}}
    print(save(a.name, result, a, end_load=settled_load(), seeds=list(range(a.repeats)), repeats=a.repeats))


if __name__ == "__main__":
    main()
