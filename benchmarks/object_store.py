"""Data and checkpoints in an object store vs on local disk, side by side in one run.

Digits (1,797 real images, written as 8x8 PNGs in class folders) is trained from the
folder on local disk and from the same files in a bucket of a local S3 server
(moto_server, the tests' server, started here as its own process), checkpoints every
epoch (no minimum interval) to the run folder or to the bucket. Same seed and config,
runs alternate (local, s3, local, s3, ...):

- pipeline throughput (upstream examples/s of the Ray Data actors) and training time to
  the digits target (0.97), S3 / local;
- checkpoint write time: a digits-model checkpoint (model, optimizer, RNG, counters as
  echoray writes them) copied to its storage the way Ray Train persists it
  (pyarrow.fs.copy_files), median of --writes, local folder vs bucket.

The S3 server runs on this machine: this measures the protocol path (HTTP requests,
signing, the server's work), not a network's latency or bandwidth.

    .venv/bin/python benchmarks/object_store.py [--pairs 2] [--writes 20]

Every run it reports is run by this invocation (no runs are read from an earlier log), so
benchmarks/results/object_store.json is regenerated from the repository alone, with the
load average at start and end and the commit (benchmarks/common.py's `save`).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from common import REPO, save, settled_load, train_in_process

sys.path.insert(0, str(REPO / "tests"))
from s3_server import S3Server  # noqa: E402 - the tests' S3 server process

RUN = ["source.kind=image_folder", "source.image_size=16", "train.checkpoint_every=1",
       "train.max_epochs=20", "train.target=0.97"]


def write_digits_folder(root: Path) -> Path:
    from echoray.data.fixtures import png_bytes
    from echoray.data.sources.digits import load_arrays

    images, labels = load_arrays()
    for i, (img, label) in enumerate(zip(images, labels, strict=True)):
        d = root / f"{label}"
        d.mkdir(parents=True, exist_ok=True)
        (d / f"{i:04d}.png").write_bytes(png_bytes(np.repeat(img, 3, axis=2)))
    return root


def one_run(where: str, data: str, storage: str | None, i: int) -> dict:
    overrides = [*RUN, f"source.path={data}"] + ([f"train.storage_path={storage}"] if storage else [])
    s, peak = train_in_process(overrides, f"{where}{i}")
    return {"where": where, "upstream_examples_per_s": s["upstream_examples_per_s"],
            "downstream_examples_per_s": s["downstream_examples_per_s"],
            "train_time_to_target_s": s["train_time_to_target_s"], "time_to_target_s": s["time_to_target_s"],
            "epochs": s["epochs"], "target_reached": s["target_reached"], "train_loop_s": s["train_loop_s"],
            "wall_s": s["wall_s"], "peak_pss_gib": peak / 2**30}


def checkpoint_writes(dest_fs, dest_root: str, n: int) -> list[float]:
    """Seconds per checkpoint copy (write the files locally, then persist them as Ray Train does)."""
    import pyarrow.fs as pafs
    import torch

    from echoray.config_load import load_config
    from echoray.records import CheckpointMeta
    from echoray.recovery import checkpoint
    from echoray.train.models import build_model

    cfg = load_config(None, [])
    model = build_model(cfg.model, 3, 10)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    times = []
    for k in range(n):
        meta = CheckpointMeta(evals=k, steps=k, first_open_pass=0, world_size=1, state={})
        d = checkpoint.write(0, model, opt, meta, {"counters": {}}, {0: np.arange(1438)}, None)
        t = time.perf_counter()
        dest_fs.create_dir(f"{dest_root}/checkpoint_{k:03d}")  # as Ray Train does before copying
        pafs.copy_files(str(d), f"{dest_root}/checkpoint_{k:03d}", source_filesystem=pafs.LocalFileSystem(),
                        destination_filesystem=dest_fs)
        times.append(time.perf_counter() - t)
    size = sum(f.stat().st_size for f in d.iterdir())
    return times, size


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pairs", type=int, default=2)
    ap.add_argument("--writes", type=int, default=20)
    args = ap.parse_args()
    import pyarrow.fs as pafs
    import ray

    tmp = Path(tempfile.mkdtemp(prefix="objbench"))
    server = S3Server(tmp / "moto.log")
    os.environ.update(server.env)  # before Ray starts: its workers inherit them
    try:
        local = write_digits_folder(tmp / "digits")
        bucket = server.make_bucket("bench")
        remote = server.upload(local, f"{bucket}/digits")
        from echoray.runtime.session import start_ray

        # The checkpoint copies first: they take seconds, and a failure there should not
        # come after the minutes of training runs (it once did: the meta record's type had
        # changed under this script).
        local_w, size = checkpoint_writes(pafs.LocalFileSystem(), str(tmp / "ckpt"), args.writes)
        s3_w, _ = checkpoint_writes(server.filesystem(), "bench/ckpt", args.writes)
        runs = []
        if args.pairs:
            start_ray()
        for i in range(args.pairs):
            runs.append(one_run("local", str(local), None, i))
            runs.append(one_run("s3", remote, f"{bucket}/runs", i))
            print(runs[-2], runs[-1], flush=True)
        if args.pairs:
            ray.shutdown()
    finally:
        server.stop()

    def med(where, key):
        vals = [r[key] for r in runs if r["where"] == where and r[key] is not None]
        return statistics.median(vals) if vals else None

    out = {"runs": runs, "summary": {}}
    for key in ("upstream_examples_per_s", "train_time_to_target_s", "time_to_target_s", "train_loop_s"):
        a, b = med("local", key), med("s3", key)
        out["summary"][key] = {"local": a, "s3": b, "s3_over_local": b / a if a and b else None}
    out["checkpoint_write"] = {
        "bytes": size, "writes": args.writes,
        "local_median_s": statistics.median(local_w), "s3_median_s": statistics.median(s3_w),
        "s3_over_local": statistics.median(s3_w) / statistics.median(local_w)}
    # The end reading once this run's own Ray, S3 server and their shut-down have wound down
    # (common.settled_load): the last S3 run alone keeps the 1-minute load near 4.5.
    print(save("object_store", out, args, end_load=settled_load()))
    print(out["summary"], out["checkpoint_write"])


if __name__ == "__main__":
    main()
