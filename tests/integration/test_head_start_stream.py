"""A head start (data/head_start.py) on a local Ray: the reading process preprocesses the
plan's first rows while the actor pool starts, and the batches are those of the whole
plan through the pool, row for row; a run trained in process with it counts exactly."""

import numpy as np
import pytest

from echoray.config_load import load_config
from echoray.data.fixtures import write_jpeg_folder
from echoray.data.head_start import head_start_chunks
from echoray.data.pipeline import build_train_dataset
from echoray.data.replay import row_keys
from echoray.data.sources import index_source
from echoray.data.sources.file_table import publish_index
from echoray.train.early_stream import batch_stream, head_started

CROP = "preprocess.augment.ops=[{op: random_resized_crop, size: 24}, {op: flip}]"
# a pool of up to 2 CPUs: a head that starts the pool later runs its calls in 2 threads
POOL4 = "preprocess.actors={min_size: 1, max_size: 4, num_cpus: 0.5}"


def overrides(root, *extra):
    # 96 photos, a quarter held out: 72 training ids in 9 chunks of 8 a pass; an actor call
    # takes 2 chunks (16 rows), so 40 head-start rows round up to 3 calls (6 chunks, 48 rows)
    return ["source.kind=image_folder", f"source.path={root}", "source.image_size=32", "source.chunk_size=8",
            "source.holdout_fraction=0.25", CROP, "echo.shuffle_buffer=0", "train.batch_size=8",
            "preprocess.batch_size=16", "preprocess.head_start_rows=40", *extra]


@pytest.mark.parametrize(("echo", "head_chunks"), [([], 6), (["echo.stage=after_augment", "echo.factor=1.5"], 6),
                                                   (["echo.shuffle_buffer=24"], 4),
                                                   (["echo.shuffle_buffer=24", "echo.stage=after_augment",
                                                     "echo.factor=1.5"], 4),
                                                   (["preprocess.head_start_pool_at=16", POOL4], 6),
                                                   (["preprocess.head_start_pool_at=40", POOL4,
                                                     "echo.stage=after_augment", "echo.factor=1.5"], 6)],
                         ids=["plain", "echo-1.5", "shuffle-24", "shuffle-24-echo-1.5",
                              "pool-at-16", "pool-at-40-echo-1.5"])
def test_a_head_start_gives_the_batches_of_the_whole_plan(local_ray, tmp_path, echo, head_chunks):
    """Every column of every batch equal, bit for bit, to the pool's over the whole plan,
    for two passes, a restored run's consumed rows left out; with a fractional echo the
    head's rows are not a multiple of the batch, so a batch spans the head and the pool.
    Through a 24-row shuffle buffer the head is the plan's first 2 one-call blocks (its
    first batch needs 24 rows) and the draws are the whole plan's, with the same seed.
    With head_start_pool_at the head's calls run in 2 threads and the pool starts after
    16 rows (one call) or 40 (the head's last call), with the same batches."""
    root = write_jpeg_folder(tmp_path / "jpg", n=96)
    cfg = load_config(None, overrides(root, "train.max_epochs=2", *echo))
    idx = publish_index(index_source(cfg.source))
    assert head_start_chunks(cfg, idx) == head_chunks
    taken = np.sort(idx.train_ids[::5])
    consumed = {0: row_keys(taken, np.zeros_like(taken))}  # a restored run's steps took these rows of pass 0
    whole = build_train_dataset(cfg, idx, consumed=consumed)
    whole.context.execution_options.preserve_order = True
    expected = list(batch_stream(whole, cfg, 0))
    got = list(head_started(cfg, idx, consumed=consumed))
    assert len(got) == len(expected) > 0
    for g, e in zip(got, expected, strict=True):
        assert set(g) == set(e) and len(g["sample_id"]) == 8
        for k in e:
            assert g[k].dtype == e[k].dtype and np.array_equal(g[k], e[k]), k
    first_copies = {(int(ep), int(i)) for b in got
                    for ep, i, c in zip(b["epoch"], b["sample_id"], b["echo_copy"], strict=True) if c == 0}
    assert not first_copies & {(0, int(i)) for i in taken}  # the head left them out too

def test_a_run_with_a_head_start_counts_exactly(run_pipeline, tmp_path):
    """`echoray train` in process with the head start: the audit holds every training id
    once per pass, and the collector counted the head's reads with the pool's."""
    root = write_jpeg_folder(tmp_path / "jpg", n=96)
    o = overrides(root, "train.max_epochs=2", "train.target=null", "audit.enabled=true", "model.width=8",
                  "scaling.local_mode=true")
    cfg = load_config(None, o)
    train_ids = index_source(cfg.source).train_ids
    assert head_start_chunks(cfg, index_source(cfg.source)) == 6
    summary, audit = run_pipeline(None, *o, name="head-start")
    t = audit.to_pydict()
    n = 2 * (len(train_ids) // 8) * 8  # drop_last: the last short batch of the plan is not trained
    assert audit.num_rows == n == summary["trained_examples"] == summary["fresh_examples"]
    assert len(set(zip(t["epoch"], t["sample_id"], strict=True))) == n
    assert summary["source_reads"] == 2 * len(train_ids)


def test_bench_input_times_the_pool_alone_and_counts_the_head_apart(local_ray, tmp_path):
    """The head's rows are read (the run's source reads) but not reported as a pool stage:
    its time, in a thread at nice 19, would add a third "actor" to the rate R sums."""
    from echoray.bench_input import bench_input

    root = write_jpeg_folder(tmp_path / "jpg", n=96)
    cfg = load_config(None, overrides(root, "train.max_epochs=1", "preprocess.actors.num_cpus=0.5",
                                      "preprocess.actors.max_size=1"))
    r = bench_input(cfg, None)  # one pass: 72 ids in 9 chunks, the first 6 (48 rows) the head's
    assert r["stages"]["upstream"]["rows"] == 24 and r["stages"]["upstream"]["actors"] == 1
    assert r["batches"] == 9 and r["first_batch_s"] > 0
