"""The head start's pure parts (data/head_start.py): the plan split where the Dataset
starts, the batches cut across any partition of the rows, and where it is left out."""

import numpy as np
import pytest

from echoray.config_load import load_config
from echoray.data.head_start import (
    head_rows,
    head_start_chunks,
    head_threads,
    preprocess_calls,
    threaded_calls,
)
from echoray.data.plan import plan_chunks, plan_rows, read_plan
from echoray.data.shuffle_buffer import exact_batches
from echoray.data.sources import index_source


def digits(*extra):
    return load_config(None, ["echo.shuffle_buffer=0", "source.chunk_size=16", "preprocess.batch_size=64", *extra])


def rows(n: int) -> dict:
    return {"sample_id": np.arange(n), "epoch": np.arange(n) // 7, "image": np.arange(n * 12, dtype=np.uint8).reshape(n, 2, 2, 3)}


@pytest.mark.parametrize("seed", range(5))
def test_any_partition_of_the_rows_gives_the_same_batches(seed):
    """Blocks of random sizes (empty ones too) cut into the batches of the rows in one block."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(0, 300))
    whole = rows(n)
    cuts = np.sort(rng.integers(0, n + 1, size=int(rng.integers(0, 12))))
    bounds = [0, *cuts.tolist(), n]
    blocks = [{k: v[a:b] for k, v in whole.items()} for a, b in zip(bounds, bounds[1:], strict=False)]
    got = list(exact_batches(blocks, 32))
    assert len(got) == n // 32
    for i, b in enumerate(got):
        for k, v in whole.items():
            assert np.array_equal(b[k], v[i * 32 : (i + 1) * 32])


def test_the_head_and_the_skipped_plan_are_the_whole_plan():
    cfg = digits("train.max_epochs=3", "preprocess.head_start_rows=300")
    idx = index_source(cfg.source)
    n_chunks = plan_chunks(idx, 16)
    chunks = head_start_chunks(cfg, idx)
    assert chunks == 20  # 300 rows in calls of 4 chunks (64 rows): 5 calls, 320 rows
    head = head_rows(cfg, idx, 0, chunks)
    rest = read_plan(cfg.seed, 3, n_chunks, block_chunks=5, first_chunks=4, n_first=2, skip_chunks=chunks)
    whole = plan_rows(cfg.seed, 3, n_chunks)
    for k in ("epoch", "chunk"):
        assert np.array_equal(np.concatenate([head[k], *[b[k] for b in rest]]), whole[k])
    assert [len(b["chunk"]) for b in rest[:3]] == [4, 4, 5]  # the pool's first calls stay small
    resumed = head_rows(cfg, idx, 2, chunks)
    assert set(resumed["epoch"].tolist()) == {2}  # a restored run's head is its first unfinished pass


def test_head_start_rows_round_up_to_whole_calls_and_stop_at_the_plan():
    idx = index_source(digits().source)
    for rows_, calls in ((1, 1), (64, 1), (65, 2), (1024, 16)):
        # a call takes 4 chunks of 16 rows
        assert head_start_chunks(digits(f"preprocess.head_start_rows={rows_}"), idx) == 4 * calls, rows_
    planned = plan_chunks(idx, 16) * 2
    assert head_start_chunks(digits("preprocess.head_start_rows=100000", "train.max_epochs=2"), idx) == planned
    assert head_start_chunks(digits("train.max_epochs=2", "preprocess.head_start_rows=64"), idx, first_epoch=2) == 0


@pytest.mark.parametrize(("batch", "calls"), [(64, 1), (65, 2), (200, 4)])
def test_by_default_the_head_is_the_first_training_batch_in_whole_calls(batch, calls):
    cfg = digits(f"train.batch_size={batch}")
    assert cfg.preprocess.head_start_rows is None
    assert head_start_chunks(cfg, index_source(cfg.source)) == 4 * calls  # calls of 4 chunks, 64 rows


def test_no_head_start_where_it_is_switched_off():
    cfg = digits("preprocess.head_start_rows=0")
    assert head_start_chunks(cfg, index_source(cfg.source)) == 0


def test_under_a_shuffle_buffer_the_head_is_its_fill_within_the_plans_one_call_blocks():
    """The reader's first batch waits for its buffer's 512 rows: 8 calls of 64 rows, which
    the plan keeps as one-call blocks for the head (head_block_count) before the pool's own
    8 (first_block_count); a longer head stops there."""
    from echoray.data.pipeline import first_block_count, head_block_count

    cfg = digits("echo.shuffle_buffer=512")
    idx = index_source(cfg.source)
    assert (head_block_count(cfg, 64), first_block_count(cfg, 64)) == (8, 8)
    assert head_block_count(digits("echo.shuffle_buffer=512", "preprocess.head_start_rows=0"), 64) == 0
    assert head_block_count(digits(), 64) == 0  # no buffer: the plan as before
    assert head_start_chunks(cfg, idx) == 32
    assert head_start_chunks(digits("echo.shuffle_buffer=512", "preprocess.head_start_rows=5000"), idx) == 32
    assert head_start_chunks(digits("echo.shuffle_buffer=512", "preprocess.head_start_rows=100"), idx) == 8
    assert head_start_chunks(digits("source.max_rows_ahead=256"), idx) == 4  # paced: one batch, one call


def test_a_plan_that_keeps_its_boundaries_drops_whole_blocks_and_refuses_a_cut_inside_one():
    whole = read_plan(3, 2, 50, block_chunks=9, first_chunks=4, n_first=5)
    for skip, dropped in ((0, 0), (4, 1), (20, 5), (29, 6)):
        kept = read_plan(3, 2, 50, block_chunks=9, first_chunks=4, n_first=5, skip_chunks=skip, keep_boundaries=True)
        assert len(kept) == len(whole) - dropped
        assert all(np.array_equal(a[k], b[k]) for a, b in zip(kept, whole[dropped:], strict=True) for k in a)
    with pytest.raises(ValueError, match="skip_chunks 6"):
        read_plan(3, 2, 50, block_chunks=9, first_chunks=4, n_first=5, skip_chunks=6, keep_boundaries=True)
    assert read_plan(3, 2, 50, block_chunks=9, skip_chunks=100, keep_boundaries=True) == []


def test_a_text_head_counts_the_sequences_of_the_plans_first_units(tmp_path, repo):
    """Text chunks are read units of many sequences: the head is the plan's first units that
    hold the buffer's fill (2,048 sequences here), in calls of 2 units."""
    from echoray.data.text.source import TextReader

    for i in range(12):
        (tmp_path / f"d{i:02d}.txt").write_text("".join(f"line {j} of document {i}\n" for j in range(400 + 40 * i)))
    cfg = load_config(repo / "pipelines" / "lm_linux_doc.yaml",
                      [f"source.path={tmp_path}", "source.seq_len=16", "source.range_bytes=2048", "source.text_suffixes=[.txt]",
                       "source.holdout_fraction=0.2", "echo.shuffle_buffer=300", "train.batch_size=16"])
    idx = index_source(cfg.source)
    chunks = head_start_chunks(cfg, idx)
    head = head_rows(cfg, idx, 0, chunks)
    base = idx.details["train_base"]
    held = base[head["chunk"] + 1] - base[head["chunk"]]
    assert chunks >= 4 and chunks % 2 == 0 and held.sum() >= 300 and held[: chunks - 2].sum() < 300  # the last call reaches it
    rows = TextReader(idx).read_units("train", head["epoch"], head["chunk"])
    assert len(rows["sample_id"]) == held.sum()


def test_calls_are_made_per_call_chunks_in_plan_order():
    calls = []

    def stage(block):
        calls.append(block["chunk"].tolist())
        yield {"sample_id": block["chunk"] * 10}

    plan = {"epoch": np.zeros(7, np.int64), "chunk": np.arange(7)}
    out = list(preprocess_calls(stage, plan, 3))
    assert calls == [[0, 1, 2], [3, 4, 5], [6]]
    assert np.array_equal(np.concatenate([o["sample_id"] for o in out]), np.arange(7) * 10)


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_threaded_calls_give_the_blocks_of_one_thread_in_plan_order(threads):
    """Calls finishing out of order (a later one sleeps less) still come out in plan order,
    each thread with a stage of its own, at most two calls a thread in flight."""
    import threading
    import time

    made, running, peak = [], [0], [0]
    lock = threading.Lock()

    def make_stage():
        made.append(threading.get_ident())

        def stage(block):
            with lock:
                running[0] += 1
                peak[0] = max(peak[0], running[0])
            time.sleep(0.002 * (8 - int(block["chunk"][0]) % 8))
            with lock:
                running[0] -= 1
            for c in block["chunk"]:  # two blocks a chunk, as a call may yield several
                yield {"sample_id": np.array([c * 10])}
                yield {"sample_id": np.array([c * 10 + 1])}
        return stage

    plan = {"epoch": np.zeros(23, np.int64), "chunk": np.arange(23)}
    out = list(threaded_calls(make_stage, plan, 3, threads))
    expected = [b["sample_id"] for b in preprocess_calls(make_stage(), plan, 3)]
    assert [o["sample_id"].tolist() for o in out] == [e.tolist() for e in expected]
    assert len(made) - 1 == len(set(made[:-1])) <= threads and peak[0] <= threads


def test_closing_threaded_calls_cancels_the_calls_not_started():
    started = []

    def make_stage():
        def stage(block):
            started.append(int(block["chunk"][0]))
            yield {"sample_id": block["chunk"]}
        return stage

    plan = {"epoch": np.zeros(100, np.int64), "chunk": np.arange(100)}
    calls = threaded_calls(make_stage, plan, 1, 2)
    assert next(calls)["sample_id"].tolist() == [0]
    calls.close()
    assert len(started) <= 5  # the first call and at most the 4 in flight with it


def test_the_head_runs_on_the_pools_cpus_and_its_pool_start_needs_its_rows():
    assert head_threads(digits()) == 1  # one actor of half a CPU
    assert head_threads(digits("preprocess.actors={min_size: 2, max_size: 2, num_cpus: 1.0}")) == 2
    assert head_threads(digits("preprocess.actors={min_size: 1, max_size: 3, num_cpus: 0.5}")) == 2
    with pytest.raises(ValueError, match="head_start_pool_at.*head_start_rows"):
        digits("preprocess.head_start_pool_at=64")
    with pytest.raises(ValueError, match=r"head_start_pool_at \(65\).*it is 64"):
        digits("preprocess.head_start_rows=64", "preprocess.head_start_pool_at=65")
    assert digits("preprocess.head_start_rows=64", "preprocess.head_start_pool_at=64").preprocess.head_start_pool_at == 64


@pytest.mark.parametrize(("rows", "at"), [(0, 0), (1, 1), (5, 1), (6, 2), (13, 3), (14, None)])
def test_the_pool_starts_once_the_head_has_made_its_rows(rows, at):
    """start() once the blocks handed on hold `rows` rows: `at` blocks seen by then."""
    from echoray.train.early_stream import _start_after

    started, seen = [], []
    blocks = ({"sample_id": np.arange(n)} for n in (5, 3, 5))  # 5, 8, 13 rows made
    for b in _start_after(blocks, rows, lambda: started.append(len(seen))):
        seen.append(len(b["sample_id"]))
    assert (started[0] if started else None) == at


def test_a_head_start_leaves_the_training_process_torch_threads_alone():
    """An actor runs torch's augmentation on one thread; the same stage in a training
    process (a head start) must not set the threads the run chose."""
    import torch

    from echoray.config import AugmentOp
    from echoray.data.stages import augmenter

    ops = [AugmentOp(op="random_resized_crop", size=8)]  # no numpy version: the torch path
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(3)
        augmenter(ops, 0, one_thread=False)
        assert torch.get_num_threads() == 3
        augmenter(ops, 0)
        assert torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(before)
