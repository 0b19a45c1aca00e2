"""benchmarks/object_store.py's checkpoint part writes real checkpoints through the
platform's own writer (recovery/checkpoint.py) and copies them as Ray Train persists them:
the files a restore reads land under one folder per write."""

import json

import pyarrow.fs as pafs

from helpers import load_benchmark

bench = load_benchmark("object_store")


def test_checkpoint_writes_copy_every_file_of_each_checkpoint(tmp_path):
    times, size = bench.checkpoint_writes(pafs.LocalFileSystem(), str(tmp_path / "ckpt"), 3)
    assert len(times) == 3 and all(t >= 0 for t in times)
    folders = sorted(p.name for p in (tmp_path / "ckpt").iterdir())
    assert folders == ["checkpoint_000", "checkpoint_001", "checkpoint_002"]
    for k, name in enumerate(folders):
        files = {p.name: p.stat().st_size for p in (tmp_path / "ckpt" / name).iterdir()}
        assert {"model.pt", "meta.json", "rank_0.pt", "rank_0.json", "consumed_0.npz"} <= set(files)
        assert json.loads((tmp_path / "ckpt" / name / "meta.json").read_text())["epoch"] == k
    assert size == sum(files.values())
